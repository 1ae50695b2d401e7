/**
 * A loopback TCP proxy for fault-injection against the REAL API server: clients connect to the proxy, which pipes
 * bytes to the target. `cut()` destroys every open connection and refuses new ones (connections are accepted and
 * closed at once, like a dead middlebox) until `restore()`. `blackhole()` is a silent partition: open connections
 * stay open but every byte in either direction is swallowed, and new connections are accepted and swallowed too —
 * the client only notices through its own timeouts. TLS passes through untouched, so clients still verify the API
 * server's certificate (its SANs include 127.0.0.1).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class TcpProxy {
  readonly port: number;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly pairs = new Set<[Socket, Socket]>();
  private blocked = false;
  private swallowing = false;
  /** Number of client connections accepted while not cut (for tests that count reconnects). */
  connections = 0;

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

  private accept(client: Socket, targetHost: string, targetPort: number): void {
    if (this.blocked) {
      client.destroy();
      return;
    }
    if (this.swallowing) {
      this.sockets.add(client);
      client.on('error', () => client.destroy());
      client.on('close', () => this.sockets.delete(client));
      client.resume(); // read and discard
      return;
    }
    this.connections++;
    const upstream = connect(targetPort, targetHost);
    const pair = [client, upstream];
    for (const s of pair) {
      this.sockets.add(s);
      s.on('error', () => pair.forEach((x) => x.destroy()));
      s.on('close', () => {
        this.sockets.delete(s);
        pair.forEach((x) => x.destroy());
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
    const pairEntry: [Socket, Socket] = [client, upstream];
    this.pairs.add(pairEntry);
    client.on('close', () => this.pairs.delete(pairEntry));
  }

  /** Swallows every byte of open and new connections (nothing is closed, nothing answers) until restore(). */
  blackhole(): void {
    this.swallowing = true;
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.resume();
      upstream.resume();
    }
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
