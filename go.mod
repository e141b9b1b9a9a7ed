module github.com/amptcp/amptcp

go 1.26.0

require (
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
