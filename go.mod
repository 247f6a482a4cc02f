module github.com/tenurehq/tenure

go 1.26
