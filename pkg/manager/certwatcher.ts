/**
 * Serving certificates that change while the server runs (TlsSource for HttpServerRunnable):
 *
 *  - CertDirWatcher: `tls.crt`/`tls.key` in a directory (`--metrics-cert-dir`, e.g. a mounted cert-manager Secret),
 *    re-read when they change — as controller-runtime's certwatcher. The directory is watched (fs.watch: inotify on
 *    Linux; a Secret volume update is a rename of its `..data` symlink inside it) and, as a safety net for
 *    filesystems or setups where events get lost, both files are re-read every `pollIntervalMs` (default 10 s, as
 *    controller-runtime). A new pair is installed only if it is valid and the key matches the certificate (Node's
 *    `tls.createSecureContext` checks both): a half-written update (new tls.crt, old tls.key) or a broken file keeps
 *    the current pair, and the next event or poll tries again. Reads and failures are counted (`reads`, `errors`).
 *  - GeneratedCertificate: a self-signed certificate made in memory (selfsigned.ts), renewed at two thirds of its
 *    lifetime (cert-manager's default `renewBefore` is one third of the duration); a failed renewal is logged and
 *    retried every `retryMs` while the current certificate is still valid.
 *
 * Both deliver each new pair through `onUpdate`; the server installs it with `setSecureContext`, so the next TLS
 * handshake presents it while connections already open keep theirs. Timers come from a Clock (fake in tests).
 */
import { X509Certificate } from 'node:crypto';
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { type Logger, silentLogger } from '../log/logger.ts';
import { type Clock, realClock, type Timer } from '../util/clock.ts';
import type { TlsPair, TlsSource } from './httpserver.ts';
import { defaultValidityMs, selfSignedCertificate } from './selfsigned.ts';

export type { TlsPair, TlsSource } from './httpserver.ts';

/** Throws (with OpenSSL's reason) unless `pair` is a usable certificate and matching private key. */
function validate(pair: TlsPair): void {
  createSecureContext({ cert: pair.cert, key: pair.key });
}

function notAfter(cert: Buffer): string | undefined {
  try {
    return new Date(new X509Certificate(cert).validTo).toISOString();
  } catch {
    return undefined; // a chain whose first block Node cannot parse alone: only used for the log line
  }
}

/** Options of CertDirWatcher: the directory and file names (default tls.crt/tls.key). */
export interface CertDirWatcherOptions {
  /** The directory holding the pair (e.g. a mounted Secret: its files are replaced through symlinks). */
  dir: string;
  /** The certificate's file name in `dir` (default `tls.crt`). */
  certFile?: string;
  /** The private key's file name in `dir` (default `tls.key`). */
  keyFile?: string;
  /** Re-read the files this often even without a filesystem event (default 10 s). */
  pollIntervalMs?: number;
  /** The timers' clock (default the real one; a fake in tests). */
  clock?: Clock;
  /** Where reloads and refused pairs are logged (default nowhere). */
  logger?: Logger;
}

/**
 * A TlsSource reading `tls.crt`/`tls.key` from a directory and re-reading them on change (controller-runtime's
 * certwatcher); a new pair is installed only if valid and matching, otherwise the current pair stays.
 */
export class CertDirWatcher implements TlsSource {
  /** Completed reads of the pair (initial one included). */
  reads = 0;
  /** Reads that failed or gave an unusable pair. */
  errors = 0;
  private readonly certPath: string;
  private readonly keyPath: string;
  private readonly dir: string;
  private readonly pollIntervalMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private current: TlsPair | undefined;
  private running = false;
  private again = false;
  private lastError = '';

  /** Reads nothing yet: the first read happens when it starts. */
  constructor(opts: CertDirWatcherOptions) {
    this.dir = opts.dir;
    this.certPath = join(opts.dir, opts.certFile ?? 'tls.crt');
    this.keyPath = join(opts.dir, opts.keyFile ?? 'tls.key');
    this.pollIntervalMs = opts.pollIntervalMs ?? 10_000;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger).child({ component: 'certwatcher', dir: opts.dir });
  }

  private async read(): Promise<TlsPair> {
    const [cert, key] = await Promise.all([readFile(this.certPath), readFile(this.keyPath)]);
    return { cert, key };
  }

  /** Reads and validates the pair once (rejecting if unusable), then watches until `signal` aborts. */
  async start(signal: AbortSignal, onUpdate: (pair: TlsPair) => void): Promise<TlsPair> {
    let first: TlsPair;
    try {
      first = await this.read();
      validate(first);
      this.reads++;
    } catch (err) {
      this.errors++;
      throw new Error(`certificate in ${this.dir}: ${(err as Error).message}`, { cause: err });
    }
    this.current = first;
    this.log.info({ notAfter: notAfter(first.cert) }, 'serving certificate loaded; watching for changes');
    if (signal.aborted) return first;

    let stopped = false;
    const kick = (): void => {
      if (stopped) return;
      if (this.running) {
        this.again = true;
        return;
      }
      this.running = true;
      void this.check(onUpdate).finally(() => {
        this.running = false;
        if (this.again) {
          this.again = false;
          kick();
        }
      });
    };
    let watcher: FSWatcher | undefined;
    try {
      watcher = watch(this.dir, { persistent: false }, kick);
      watcher.on('error', (err) => {
        this.log.warn({ err }, 'watching the certificate directory failed; polling only');
        watcher?.close();
      });
    } catch (err) {
      this.log.warn({ err }, 'cannot watch the certificate directory; polling only');
    }
    let timer: Timer;
    const schedule = (): void => {
      timer = this.clock.setTimer(this.pollIntervalMs, () => {
        kick();
        schedule();
      });
    };
    schedule();
    signal.addEventListener('abort', () => {
      stopped = true;
      watcher?.close();
      timer.cancel();
    }, { once: true });
    return first;
  }

  private async check(onUpdate: (pair: TlsPair) => void): Promise<void> {
    let pair: TlsPair;
    try {
      pair = await this.read();
      if (this.current && pair.cert.equals(this.current.cert) && pair.key.equals(this.current.key)) {
        this.reads++;
        return;
      }
      validate(pair);
      this.reads++;
    } catch (err) {
      this.errors++;
      const message = (err as Error).message;
      // A writer between the two files, or the kubelet between symlinks: say it once, not on every poll.
      if (message !== this.lastError) this.log.warn({ err: message }, 'new certificate files not usable (yet); keeping the current certificate');
      this.lastError = message;
      return;
    }
    this.lastError = '';
    this.current = pair;
    this.log.info({ notAfter: notAfter(pair.cert) }, 'serving certificate reloaded');
    onUpdate(pair);
  }
}

/** Options of GeneratedCertificate: the names the certificate is valid for, its lifetime and retry delay. */
export interface GeneratedCertificateOptions {
  /** The subject's common name (default `ts-controller-manager-metrics`). */
  commonName?: string;
  /** Subject alternative DNS names (default `localhost`). */
  dnsNames?: string[];
  /** Subject alternative IP addresses (default `127.0.0.1`). */
  ips?: string[];
  /** Lifetime of each certificate (default 365 days); renewed after two thirds of it. */
  validityMs?: number;
  /** Delay before retrying a failed renewal (default 1 minute). */
  retryMs?: number;
  /** The renewal timers' clock (default the real one; a fake in tests). */
  clock?: Clock;
  /** Where renewals and their failures are logged (default nowhere). */
  logger?: Logger;
  /** Certificate maker (tests); default selfSignedCertificate with the names above. */
  generate?: (validityMs: number) => Promise<{ cert: string; key: string }>;
}

/**
 * A TlsSource serving a self-signed certificate made in memory, renewed after two thirds of its lifetime; a failed
 * renewal is retried every `retryMs` while the current certificate is still valid.
 */
export class GeneratedCertificate implements TlsSource {
  private readonly validityMs: number;
  private readonly retryMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly generate: (validityMs: number) => Promise<{ cert: string; key: string }>;

  /** Makes nothing yet: the first certificate is made when it starts. */
  constructor(opts: GeneratedCertificateOptions = {}) {
    this.validityMs = opts.validityMs ?? defaultValidityMs;
    this.retryMs = opts.retryMs ?? 60_000;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger).child({ component: 'certwatcher' });
    const commonName = opts.commonName ?? 'ts-controller-manager-metrics';
    const dnsNames = opts.dnsNames ?? ['localhost'];
    const ips = opts.ips ?? ['127.0.0.1'];
    this.generate = opts.generate ?? ((validityMs) => selfSignedCertificate({ commonName, dnsNames, ips, validityMs }));
  }

  private async make(): Promise<TlsPair> {
    const { cert, key } = await this.generate(this.validityMs);
    return { cert: Buffer.from(cert), key: Buffer.from(key) };
  }

  async start(signal: AbortSignal, onUpdate: (pair: TlsPair) => void): Promise<TlsPair> {
    const first = await this.make();
    this.log.info({ notAfter: notAfter(first.cert) }, 'generated a self-signed serving certificate');
    let timer: Timer | undefined;
    let expiresAt = this.clock.now() + this.validityMs;
    const schedule = (ms: number): void => {
      if (signal.aborted) return;
      timer = this.clock.setTimer(ms, () => {
        timer = undefined;
        this.make().then(
          (pair) => {
            if (signal.aborted) return;
            expiresAt = this.clock.now() + this.validityMs;
            this.log.info({ notAfter: notAfter(pair.cert) }, 'renewed the self-signed serving certificate');
            onUpdate(pair);
            schedule((this.validityMs * 2) / 3);
          },
          (err: unknown) => {
            this.log.error({ err, expiresInMs: expiresAt - this.clock.now(), retryInMs: this.retryMs },
              'renewing the self-signed serving certificate failed; retrying');
            schedule(this.retryMs);
          },
        );
      });
    };
    schedule((this.validityMs * 2) / 3);
    signal.addEventListener('abort', () => timer?.cancel(), { once: true });
    return first;
  }
}
