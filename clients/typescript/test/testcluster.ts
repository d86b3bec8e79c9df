// Drives clients/testing/cluster.py, the local cluster shared by the client test suites. The
// launcher stops every node on stop() and also when this process dies (its stdin closes).
import { type ChildProcessByStdio, spawn } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createInterface, type Interface } from "node:readline";

export interface NodeInfo {
  id: number;
  api: string;
  peer: string;
  pid: number;
  log: string;
}

export interface ClusterInfo {
  dir: string;
  leader: number;
  ca: string | null;
  tokens: Record<string, string>;
  nodes: NodeInfo[];
}

export function repoRoot(): string {
  let dir = resolve(__dirname);
  while (!existsSync(join(dir, "clients", "testing", "cluster.py"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("clients/testing/cluster.py not found above " + __dirname);
    dir = parent;
  }
  return dir;
}

export class TestCluster {
  private readonly lines: AsyncIterator<string>;
  private constructor(
    private readonly proc: ChildProcessByStdio<Writable, Readable, null>,
    rl: Interface,
    public info: ClusterInfo,
  ) {
    this.lines = rl[Symbol.asyncIterator]();
  }

  static async start(nodes: number, secure: boolean): Promise<TestCluster> {
    const args = [join(repoRoot(), "clients", "testing", "cluster.py"), "--nodes", String(nodes)];
    if (secure) args.push("--secure");
    const proc = spawn(process.env.PYTHON ?? "python3", args, { stdio: ["pipe", "pipe", "inherit"] });
    const rl = createInterface({ input: proc.stdout });
    const first = await rl[Symbol.asyncIterator]().next();
    if (first.done) throw new Error("the cluster launcher exited before the cluster was up (see stderr)");
    return new TestCluster(proc, rl, JSON.parse(first.value) as ClusterInfo);
  }

  private queue: Promise<unknown> = Promise.resolve();

  /** Sends one command and resolves with its JSON answer (commands run one at a time). */
  command(line: string): Promise<Record<string, unknown>> {
    const run = async () => {
      this.proc.stdin.write(line + "\n");
      const ans = await this.lines.next();
      if (ans.done) throw new Error(`${line}: the launcher exited`);
      const o = JSON.parse(ans.value) as Record<string, unknown>;
      if (!o.ok) throw new Error(`${line}: ${String(o.error)}`);
      return o;
    };
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => undefined);
    return p;
  }

  async leader(): Promise<number> {
    return (await this.command("leader")).leader as number;
  }
  async kill(id: number): Promise<void> {
    await this.command(`kill ${id}`);
  }
  async restart(id: number): Promise<void> {
    await this.command(`restart ${id}`);
  }
  get apis(): string[] {
    return this.info.nodes.map((n) => n.api);
  }
  api(id: number): string {
    return this.info.nodes[id - 1].api;
  }
  others(id: number): string[] {
    return this.info.nodes.filter((n) => n.id !== id).map((n) => n.api);
  }
  get ca(): Buffer | undefined {
    return this.info.ca ? readFileSync(this.info.ca) : undefined;
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.proc.once("exit", r));
    try {
      await this.command("stop");
    } catch {
      // the launcher is gone already
    }
    this.proc.stdin.end();
    if (this.proc.exitCode === null) await exited;
  }
}
