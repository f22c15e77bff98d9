package redistest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server when the test binary dies, so a crashed test
// leaves no redis-server behind.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
