package main

// Azure Blob Storage leases: azblob://CONTAINER/PREFIX URLs.
import _ "github.com/tenurehq/tenure/store/azblob"
