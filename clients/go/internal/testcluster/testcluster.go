// Package testcluster drives clients/testing/cluster.py, the local Gateway cluster shared by
// the client test suites: it starts the launcher, reads the cluster's description and sends
// it commands (leader, kill, restart). The launcher stops every node when Stop is called or
// when this process dies (its stdin closes).
package testcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Node is one node of the cluster.
type Node struct {
	ID   int    `json:"id"`
	API  string `json:"api"`
	Peer string `json:"peer"`
	PID  int    `json:"pid"`
	Log  string `json:"log"`
}

// Info describes the cluster as the launcher printed it.
type Info struct {
	Dir    string            `json:"dir"`
	Leader int               `json:"leader"`
	CA     string            `json:"ca"`
	Tokens map[string]string `json:"tokens"`
	Nodes  []Node            `json:"nodes"`
}

// Cluster is a running launcher.
type Cluster struct {
	Info
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	mu    sync.Mutex
}

// repoRoot finds the repository root (the directory holding clients/testing/cluster.py)
// from the working directory upwards.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "clients", "testing", "cluster.py")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testcluster: clients/testing/cluster.py not found above the working directory")
		}
		dir = parent
	}
}

// Start launches a cluster of n nodes (secure: TLS and bearer tokens on the API) and waits
// until it has a leader. The Python interpreter is $PYTHON, else python3.
func Start(n int, secure bool) (*Cluster, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	args := []string{filepath.Join(root, "clients", "testing", "cluster.py"), "--nodes", fmt.Sprint(n)}
	if secure {
		args = append(args, "--secure")
	}
	cmd := exec.Command(python, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testcluster: starting %s: %w", python, err)
	}
	c := &Cluster{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		_ = cmd.Wait()
		return nil, fmt.Errorf("testcluster: the launcher exited before the cluster was up (%v)", err)
	}
	if err := json.Unmarshal(line, &c.Info); err != nil {
		c.Stop()
		return nil, fmt.Errorf("testcluster: bad launcher output %q: %w", line, err)
	}
	return c, nil
}

// APIs are the nodes' API addresses in node order.
func (c *Cluster) APIs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.API
	}
	return out
}

// API is node id's API address.
func (c *Cluster) API(id int) string { return c.Nodes[id-1].API }

// command sends one command line and decodes the answer into out (may be nil).
func (c *Cluster) command(line string, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		return fmt.Errorf("testcluster: %s: %w", line, err)
	}
	raw, err := c.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("testcluster: %s: no answer: %w", line, err)
	}
	var ans struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return fmt.Errorf("testcluster: %s: bad answer %q", line, raw)
	}
	if !ans.OK {
		return fmt.Errorf("testcluster: %s: %s", line, ans.Error)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// Leader waits until the running nodes agree on a leader and returns its id.
func (c *Cluster) Leader() (int, error) {
	var ans struct {
		Leader int `json:"leader"`
	}
	err := c.command("leader", &ans)
	return ans.Leader, err
}

// Kill SIGKILLs node id.
func (c *Cluster) Kill(id int) error { return c.command(fmt.Sprintf("kill %d", id), nil) }

// Restart starts node id again on its ports and data and waits for its API.
func (c *Cluster) Restart(id int) error { return c.command(fmt.Sprintf("restart %d", id), nil) }

// Stop stops every node and the launcher.
func (c *Cluster) Stop() {
	_ = c.command("stop", nil)
	_ = c.stdin.Close()
	_ = c.cmd.Wait()
}

// Others are the API addresses of every node but id.
func (c *Cluster) Others(id int) []string {
	var out []string
	for _, n := range c.Nodes {
		if n.ID != id {
			out = append(out, n.API)
		}
	}
	return out
}

// String is a one-line description for failure messages.
func (c *Cluster) String() string {
	return fmt.Sprintf("cluster in %s: %s", c.Dir, strings.Join(c.APIs(), ", "))
}
