package main

// The etcd store: --store etcd://[user:password@]host:port[,host:port]/prefix
import _ "github.com/tenurehq/tenure/store/etcd"
