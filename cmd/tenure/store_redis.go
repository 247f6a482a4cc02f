package main

// The Redis store: --store redis://[:password@]host:6379/0 (rediss:// for TLS)
import _ "github.com/tenurehq/tenure/store/redis"
