package main

// The ZooKeeper store: --store zk://[user:password@]host:port[,host:port]/path
import _ "github.com/tenurehq/tenure/store/zk"
