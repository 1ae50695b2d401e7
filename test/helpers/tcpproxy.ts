/**
 * A loopback TCP proxy for fault-injection against the REAL API server: clients connect to the proxy, which pipes
 * bytes to the target. `cut()` destroys every open connection and refuses new ones (connections are accepted and
 * closed at once, like a dead middlebox) until `restore()`. `blackhole()` is a silent partition: open connections
 * stay open but every byte in either direction is swallowed, and new connections are accepted and swallowed too —
 * the client only notices through its own timeouts. `hold()` is a delay, not a loss: every byte the client sends
 * (on open and new connections) is kept, in order, instead of forwarded, while the answers still flow; `deliver()`
 * then forwards everything kept, in the order it was sent, even when the client has gone meanwhile (its upstream
 * connection is kept open for that, and whatever the server answers on it is discarded): a request that sat in a
 * congested path lands late. TLS passes through untouched, so clients still verify the API server's certificate (its
 * SANs include 127.0.0.1).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

/** One proxied connection. `held` is set while holding: the client's bytes not yet forwarded, in order. */
interface Link {
  client: Socket;
  upstream: Socket;
  held: Buffer[] | undefined;
  clientGone: boolean;
}

export class TcpProxy {
  readonly port: number;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly links = new Set<Link>();
  private blocked = false;
  private swallowing = false;
  private holding = false;
  /** Number of client connections accepted while not cut (for tests that count reconnects). */
  connections = 0;
  /** Bytes kept by `hold()` since the proxy started (delivered or not). */
  heldBytes = 0;

  private constructor(server: Server, port: number) {
    this.server = server;
    this.port = port;
  }

  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    const server = createServer();
    await new Promise<void>((res, rej) => {
      server.once('error', rej);
      server.listen(0, '127.0.0.1', () => res());
    });
    const addr = server.address();
    const proxy = new TcpProxy(server, typeof addr === 'object' && addr ? addr.port : 0);
    server.on('connection', (client: Socket) => proxy.accept(client, targetHost, targetPort));
    return proxy;
  }

  private track(s: Socket): void {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
  }

  private accept(client: Socket, targetHost: string, targetPort: number): void {
    if (this.blocked) {
      client.destroy();
      return;
    }
    if (this.swallowing) {
      this.track(client);
      client.on('error', () => client.destroy());
      client.resume(); // read and discard
      return;
    }
    this.connections++;
    const upstream = connect(targetPort, targetHost);
    const link: Link = { client, upstream, held: this.holding ? [] : undefined, clientGone: false };
    this.links.add(link);
    this.track(client);
    this.track(upstream);
    client.on('data', (chunk: Buffer) => {
      if (this.swallowing) return;
      if (link.held) {
        link.held.push(chunk);
        this.heldBytes += chunk.length;
      } else {
        upstream.write(chunk);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!this.swallowing && !link.clientGone) client.write(chunk);
    });
    // The client going away ends the upstream connection too — unless bytes are kept for it, which `deliver()` still
    // sends (the upstream then lives until the server closes it or the proxy closes).
    const clientGone = (): void => {
      link.clientGone = true;
      if (!link.held) upstream.destroy();
    };
    client.on('error', () => client.destroy());
    client.on('close', clientGone);
    upstream.on('error', () => upstream.destroy());
    upstream.on('close', () => {
      client.destroy();
      this.links.delete(link);
    });
  }

  /** Swallows every byte of open and new connections (nothing is closed, nothing answers) until restore(). */
  blackhole(): void {
    this.swallowing = true;
  }

  /**
   * Keeps every byte clients send (open and new connections) instead of forwarding it, until `deliver()`; answers
   * already on their way still reach the clients. Returns at once.
   */
  hold(): void {
    this.holding = true;
    for (const l of this.links) l.held ??= [];
  }

  /**
   * Ends `hold()`: forwards every kept byte, in the order it was sent, then lets traffic flow again. A connection
   * whose client left meanwhile gets its bytes all the same (answers discarded). Returns how many bytes and
   * connections were delivered.
   */
  deliver(): { bytes: number; connections: number } {
    this.holding = false;
    let bytes = 0;
    let connections = 0;
    for (const l of this.links) {
      const held = l.held;
      l.held = undefined;
      if (!held?.length) continue;
      connections++;
      for (const chunk of held) {
        bytes += chunk.length;
        l.upstream.write(chunk);
      }
    }
    return { bytes, connections };
  }

  /** Kills every open connection and refuses new ones until restore(). */
  cut(): void {
    this.blocked = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  /** New connections pass again (connections black-holed meanwhile stay dead: destroyed here). */
  restore(): void {
    this.blocked = false;
    if (this.swallowing) {
      this.swallowing = false;
      for (const s of this.sockets) s.destroy();
    }
  }

  get isCut(): boolean {
    return this.blocked;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((res) => this.server.close(() => res()));
  }
}

/** Rewrites a kubeconfig's server URL to go through the proxy (keeps TLS verification: the cert has IP SAN 127.0.0.1). */
export function proxiedServer(server: string, proxy: TcpProxy): string {
  const url = new URL(server);
  url.port = String(proxy.port);
  return url.toString().replace(/\/$/, '');
}
