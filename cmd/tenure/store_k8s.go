package main

// The Kubernetes Lease store: --store k8s://NAMESPACE[/PREFIX][?kubeconfig=PATH&context=NAME]
import _ "github.com/tenurehq/tenure/store/k8s"
