package main

// The PostgreSQL store: --store postgres://user:pass@host:5432/db?tenure_table=tenure_leases
import _ "github.com/tenurehq/tenure/store/postgres"
