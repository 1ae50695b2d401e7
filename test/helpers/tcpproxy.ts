/**
 * A loopback TCP proxy for fault-injection against the REAL API server: clients connect to the proxy, which pipes
 * bytes to the target. `cut()` destroys every open connection and refuses new ones (connections are accepted and
 * closed at once, like a dead middlebox) until `restore()`. TLS passes through untouched, so clients still verify
 * the API server's certificate (its SANs include 127.0.0.1).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class TcpProxy {
  readonly port: number;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
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
    // Bytes are forwarded unless black-holed (then read and dropped: the peer sees a silent, open connection).
    client.on('data', (b: Buffer) => {
      if (!this.swallowing) upstream.write(b);
    });
    upstream.on('data', (b: Buffer) => {
      if (!this.swallowing) client.write(b);
    });
  }

  /** Keeps every connection open but drops all bytes both ways (a black-holed route), until restore(). */
  blackHole(): void {
    this.swallowing = true;
  }

  /** Kills every open connection and refuses new ones until restore(). */
  cut(): void {
    this.blocked = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  /** Accepts connections again; connections that lived through a black hole are closed (their streams lost bytes). */
  restore(): void {
    if (this.swallowing) {
      for (const sock of this.sockets) sock.destroy();
      this.sockets.clear();
    }
    this.blocked = false;
    this.swallowing = false;
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
