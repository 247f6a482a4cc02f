// Package nats is a [tenure.Store] on a NATS JetStream key-value bucket.
package nats
