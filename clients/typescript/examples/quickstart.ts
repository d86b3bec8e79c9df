// Quickstart: write a row, read it back, then follow the change stream with subscribe().
//
//   npm run build && node dist/examples/quickstart.js 127.0.0.1:7071,127.0.0.1:7072 [EVENTS]
//
// GATEWAY_TOKEN and GATEWAY_CA (a PEM file) turn on bearer tokens and TLS.
import { readFileSync } from "node:fs";
import { GatewayClient, GatewayError, decimal, insert } from "../src/index";

async function main(): Promise<void> {
  const targets = (process.argv[2] ?? "127.0.0.1:7070").split(",");
  const events = Number(process.argv[3] ?? 0); // 0: follow until Ctrl-C
  const client = new GatewayClient(targets, {
    token: process.env.GATEWAY_TOKEN,
    rootCerts: process.env.GATEWAY_CA ? readFileSync(process.env.GATEWAY_CA) : undefined,
  });
  const stop = new AbortController();
  process.once("SIGINT", () => stop.abort());
  try {
    const id = BigInt(Date.now()) * 1000n + BigInt(process.pid % 1000);
    const r = await client.write([insert("shop.items", { id }, { name: "widget", price: decimal("9.90") })]);
    console.log(`wrote id ${id}: gtid ${r.gtid?.serverId}:${r.gtid?.transId} at log index ${r.logIndex}`);
    console.log("read back:", await client.get("shop.items", id));
    let n = 0;
    for await (const ev of client.subscribe({ fromLogIndex: r.logIndex }, { signal: stop.signal })) {
      const g = ev.transaction?.gtid;
      console.log(`event: log index ${ev.logIndex}, gtid ${g?.serverId}:${g?.transId}, ${ev.transaction?.statements.length} statement(s)`);
      if (++n === events) break;
    }
  } catch (e) {
    if (stop.signal.aborted) return;
    if (e instanceof GatewayError) {
      console.error(`failed: ${e.codeName} ${e.details}${e.field ? ` (field ${e.field})` : ""}`);
      process.exitCode = 1;
      return;
    }
    throw e;
  } finally {
    client.close();
  }
}

void main();
