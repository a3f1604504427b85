//go:build !linux

package main

import "errors"

// mountTmpfs is Linux-only.
func mountTmpfs(dir, size string) (func(), error) {
	return nil, errors.New("tmpfs mounts are Linux-only")
}
