package main

// The NATS store: --store nats://[user:password@]host:port[,host:port]/BUCKET[/PREFIX]
import _ "github.com/tenurehq/tenure/store/nats"
