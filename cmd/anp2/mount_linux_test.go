package main

import "syscall"

// mountTmpfs mounts a tmpfs of size (e.g. "4m") at dir and returns its
// unmount; it fails unless the process may mount (root).
func mountTmpfs(dir, size string) (func(), error) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		return nil, err
	}
	return func() { syscall.Unmount(dir, 0) }, nil
}
