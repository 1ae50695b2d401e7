/**
 * HttpServerRunnable: an HTTP(S) server as a Runnable (health probes, metrics).
 *
 * Contract: `start` rejects if the address cannot be bound (e.g. EADDRINUSE), which the Manager treats as fatal.
 * After the signal aborts, the server stops accepting connections, idle keep-alive connections are closed at once,
 * and connections still busy after `shutdownTimeoutMs` are destroyed; `start` then resolves. `listening` resolves
 * with the bound address once the server accepts connections (useful with port 0).
 */
import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions as HttpsOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import { type Logger, silentLogger } from '../log/logger.ts';
import { realClock } from '../util/clock.ts';
import type { Runnable } from './runnable.ts';

export interface BindAddress {
  /** undefined = all interfaces. */
  host: string | undefined;
  port: number;
}

/** Parses "host:port", ":port", "[v6]:port"; returns undefined for "0" (disabled). Throws on anything else. */
export function parseBindAddress(text: string): BindAddress | undefined {
  if (text === '0') return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]*)):(\d{1,5})$/.exec(text);
  const port = Number(m?.[3]);
  if (!m || !(port >= 0 && port <= 65535)) {
    throw new Error(`invalid address ${JSON.stringify(text)} (want "host:port", ":port" or "0" to disable)`);
  }
  const host = m[1] ?? m[2];
  return { host: host === '' ? undefined : host, port };
}

export interface HttpServerOptions {
  name: string;
  /** A bind address other than "0". */
  bindAddress: string;
  handler: RequestListener;
  /** Produces TLS material at start (may be slow: certificate generation). Plain HTTP when absent. */
  tls?: () => Promise<HttpsOptions>;
  shutdownTimeoutMs?: number;
  logger?: Logger;
}

export class HttpServerRunnable implements Runnable {
  readonly name: string;
  readonly needLeaderElection = false;
  /** Resolves with the bound address once listening. */
  readonly listening: Promise<AddressInfo>;
  private resolveListening!: (a: AddressInfo) => void;
  private rejectListening!: (err: Error) => void;
  private readonly opts: HttpServerOptions;
  private readonly address: BindAddress;
  private readonly log: Logger;
  /** The underlying server once started (e.g. for setSecureContext on certificate rotation). */
  server: Server | undefined;

  constructor(opts: HttpServerOptions) {
    const address = parseBindAddress(opts.bindAddress);
    if (!address) throw new Error(`${opts.name}: bind address "0" means disabled; do not create the server`);
    this.opts = opts;
    this.address = address;
    this.name = opts.name;
    this.log = (opts.logger ?? silentLogger).child({ component: opts.name });
    this.listening = new Promise((resolve, reject) => {
      this.resolveListening = resolve;
      this.rejectListening = reject;
    });
    // `listening` may legitimately never be awaited; do not turn a bind failure into an unhandled rejection.
    this.listening.catch(() => {});
  }

  async start(signal: AbortSignal): Promise<void> {
    let server: Server;
    try {
      if (signal.aborted) throw new Error(`${this.name}: aborted before start`);
      server = this.opts.tls ? createHttpsServer(await this.opts.tls(), this.opts.handler) : createHttpServer(this.opts.handler);
      this.server = server;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ port: this.address.port, host: this.address.host }, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      this.rejectListening(err as Error);
      throw err;
    }
    const addr = server.address() as AddressInfo;
    this.log.info({ address: addr.address, port: addr.port, tls: Boolean(this.opts.tls) }, 'serving');
    this.resolveListening(addr);
    server.on('error', (err) => this.log.error({ err }, 'server error'));

    await new Promise<void>((resolve) => {
      const stop = (): void => {
        const closed = new Promise<void>((r) => server.close(() => r()));
        server.closeIdleConnections();
        // realClock: unref'd, and safe for any shutdownTimeoutMs (plain setTimeout overflows above 2^31-1 ms).
        const timer = realClock.setTimer(this.opts.shutdownTimeoutMs ?? 5_000, () => server.closeAllConnections());
        void closed.then(() => {
          timer.cancel();
          this.log.info('stopped');
          resolve();
        });
      };
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
    });
  }
}
