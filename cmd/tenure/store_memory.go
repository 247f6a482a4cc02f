package main

// The in-process store, memory://NAME: useful only inside one tenure
// process (tests, `tenure status` of a never-granted key).
import _ "github.com/tenurehq/tenure/store/memory"
