package azblob

// BlobName is the blob that holds key under prefix, as the store names it.
var BlobName = blobName
