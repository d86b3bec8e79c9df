package io.gateway.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Drives clients/testing/cluster.py, the local cluster shared by the client test suites. The
 * launcher stops every node on {@link #close} and also when this JVM dies (its stdin closes).
 */
final class TestCluster implements AutoCloseable {
  private final Process process;
  private final Writer in;
  private final BufferedReader out;
  final List<String> apis = new ArrayList<>();
  final Map<String, String> tokens = new HashMap<>();
  final byte[] ca;
  final String dir;

  private TestCluster(Process process) throws IOException {
    this.process = process;
    this.in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
    this.out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    String line = out.readLine();
    if (line == null) {
      process.destroyForcibly();
      throw new IOException("the cluster launcher exited before the cluster was up (see stderr)");
    }
    JsonObject info = JsonParser.parseString(line).getAsJsonObject();
    for (JsonElement n : info.getAsJsonArray("nodes")) {
      apis.add(n.getAsJsonObject().get("api").getAsString());
    }
    for (Map.Entry<String, JsonElement> e : info.getAsJsonObject("tokens").entrySet()) {
      tokens.put(e.getKey(), e.getValue().getAsString());
    }
    ca = info.get("ca").isJsonNull() ? null : Files.readAllBytes(Path.of(info.get("ca").getAsString()));
    dir = info.get("dir").getAsString();
  }

  /** Starts {@code nodes} nodes (secure: TLS and tokens) and waits for a leader. */
  static TestCluster start(int nodes, boolean secure) throws IOException {
    Path root = Path.of("").toAbsolutePath();
    while (!Files.exists(root.resolve("clients/testing/cluster.py"))) {
      root = root.getParent();
      if (root == null) {
        throw new IOException("clients/testing/cluster.py not found above the working directory");
      }
    }
    String python = System.getenv().getOrDefault("PYTHON", "python3");
    List<String> cmd = new ArrayList<>(List.of(python, root.resolve("clients/testing/cluster.py").toString(),
        "--nodes", Integer.toString(nodes)));
    if (secure) {
      cmd.add("--secure");
    }
    Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    return new TestCluster(p);
  }

  private synchronized JsonObject command(String line) throws IOException {
    in.write(line + "\n");
    in.flush();
    String answer = out.readLine();
    if (answer == null) {
      throw new IOException(line + ": the launcher exited");
    }
    JsonObject o = JsonParser.parseString(answer).getAsJsonObject();
    if (!o.get("ok").getAsBoolean()) {
      throw new IOException(line + ": " + o.get("error").getAsString());
    }
    return o;
  }

  int leader() throws IOException {
    return command("leader").get("leader").getAsInt();
  }

  void kill(int id) throws IOException {
    command("kill " + id);
  }

  void restart(int id) throws IOException {
    command("restart " + id);
  }

  String api(int id) {
    return apis.get(id - 1);
  }

  List<String> others(int id) {
    List<String> out = new ArrayList<>(apis);
    out.remove(id - 1);
    return out;
  }

  @Override
  public void close() throws InterruptedException {
    try {
      command("stop");
      in.close();
    } catch (IOException e) {
      // the launcher is gone already
    }
    process.waitFor();
  }
}
