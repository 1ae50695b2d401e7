/**
 * ListWatcher: the two API calls a Reflector makes, behind an interface so the state machine's driver does not
 * know about URLs (client-go's ListerWatcher). RestListWatcher implements it with RestClient for one resource
 * collection (one namespace or all).
 *
 * Contract:
 *  - `list` fetches one page (`limit`, `continue`), consistent read (no resourceVersion: served from etcd, so
 *    pagination is honoured). List items get `apiVersion`/`kind` filled in (the API server omits them in lists).
 *  - `metadataOnly`: the server is asked for PartialObjectMetadata (list and watch; plain JSON accepted as a fallback
 *    from servers that cannot, e.g. some aggregated APIs), and every object comes out as `{ apiVersion, kind,
 *    metadata }` with the RESOURCE's apiVersion and kind (as controller-runtime's metadata informers set the GVK),
 *    whatever the server sent — so a cache of it never holds a spec or status.
 *  - `watch` resolves when the server answered 200, with the decoded event stream; any other status rejects with
 *    ApiError. The stream ends when the server closes it (timeoutSeconds) and throws on a broken connection or a
 *    truncated event; events of an unknown type are skipped and reported to `onUnknownEventType`. Aborting `signal`
 *    tears the request down. `onData` sees every chunk (idle detection).
 */
import { ApiError, type Query, type RestClient } from '../client/rest.ts';
import type { KubeObject } from '../apimachinery/meta.ts';
import { collectionPath } from '../apimachinery/paths.ts';
import { apiVersionOf, type ResourceType } from '../apimachinery/resource.ts';
import { decodeWatchStream, type WatchEvent } from './watchdecoder.ts';

export interface ListPage {
  items: KubeObject[];
  continueToken: string | undefined;
  resourceVersion: string;
}

export interface ListRequest {
  continueToken: string | undefined;
  /** Page size; 0 = no limit (one unpaginated LIST). */
  limit: number;
  signal: AbortSignal;
}

export interface WatchRequest {
  /** '' = start at the most recent state (with sendInitialEvents: a consistent snapshot first). */
  resourceVersion: string;
  timeoutSeconds: number;
  sendInitialEvents: boolean;
  signal: AbortSignal;
  onData?: (bytes: number) => void;
  /** Called for each event skipped because its type is unknown (the stream goes on). */
  onUnknownEventType?: (type: string) => void;
}

export interface ListWatcher {
  list(req: ListRequest): Promise<ListPage>;
  watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent<KubeObject>>>;
}

export interface RestListWatcherOptions {
  /** A RestClient (only `json` and `request` are used). */
  client: Pick<RestClient, 'json' | 'request'>;
  resource: ResourceType;
  /** undefined or '' = all namespaces (always for cluster-scoped resources). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Timeout of one LIST page request. Default 60 s. */
  listTimeoutMs?: number;
  /** List and watch metadata only (PartialObjectMetadata; see the file comment). Default false. */
  metadataOnly?: boolean;
}

/** Accept headers asking for metadata only, with plain JSON as the fallback (client-go's metadata client sends the same). */
export const metadataListAccept = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
export const metadataWatchAccept = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

/** `{ apiVersion, kind, metadata }` of `obj` under the resource's apiVersion and kind (a full object from a fallback loses the rest). */
function asMetadata(obj: KubeObject, apiVersion: string, kind: string): KubeObject {
  return { apiVersion, kind, metadata: obj.metadata ?? {} };
}

interface ListBody {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: KubeObject[];
}

/** The query of a watch request (exported for tests). */
export function watchQuery(req: Omit<WatchRequest, 'signal' | 'onData' | 'onUnknownEventType'>, selectors: { labelSelector?: string; fieldSelector?: string } = {}): Query {
  return {
    watch: 'true',
    allowWatchBookmarks: 'true',
    timeoutSeconds: req.timeoutSeconds,
    resourceVersion: req.resourceVersion || undefined,
    sendInitialEvents: req.sendInitialEvents ? 'true' : undefined,
    resourceVersionMatch: req.sendInitialEvents ? 'NotOlderThan' : undefined,
    labelSelector: selectors.labelSelector || undefined,
    fieldSelector: selectors.fieldSelector || undefined,
  };
}

export class RestListWatcher implements ListWatcher {
  private readonly client: Pick<RestClient, 'json' | 'request'>;
  private readonly resource: ResourceType;
  private readonly path: string;
  private readonly labelSelector: string | undefined;
  private readonly fieldSelector: string | undefined;
  private readonly listTimeoutMs: number;
  private readonly metadataOnly: boolean;

  constructor(opts: RestListWatcherOptions) {
    this.client = opts.client;
    this.resource = opts.resource;
    this.path = collectionPath(opts.resource, opts.resource.namespaced ? opts.namespace : undefined);
    this.labelSelector = opts.labelSelector;
    this.fieldSelector = opts.fieldSelector;
    this.listTimeoutMs = opts.listTimeoutMs ?? 60_000;
    this.metadataOnly = opts.metadataOnly ?? false;
  }

  async list(req: ListRequest): Promise<ListPage> {
    const body = await this.client.json<ListBody>('GET', this.path, {
      query: {
        limit: req.limit > 0 ? req.limit : undefined,
        continue: req.continueToken || undefined,
        labelSelector: this.labelSelector || undefined,
        fieldSelector: this.fieldSelector || undefined,
      },
      signal: req.signal,
      timeoutMs: this.listTimeoutMs,
      ...(this.metadataOnly ? { accept: metadataListAccept } : {}),
    });
    const apiVersion = apiVersionOf(this.resource);
    let items = body.items ?? [];
    if (this.metadataOnly) items = items.map((item) => asMetadata(item, apiVersion, this.resource.kind));
    else {
      for (const item of items) {
        item.apiVersion ??= apiVersion;
        item.kind ??= this.resource.kind;
      }
    }
    return {
      items,
      continueToken: body.metadata?.continue || undefined,
      resourceVersion: body.metadata?.resourceVersion ?? '',
    };
  }

  async watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent<KubeObject>>> {
    const res = await this.client.request('GET', this.path, {
      query: watchQuery(req, { labelSelector: this.labelSelector, fieldSelector: this.fieldSelector }),
      signal: req.signal,
      timeoutMs: 0,
      ...(this.metadataOnly ? { accept: metadataWatchAccept } : {}),
    });
    if (res.status !== 200) throw await ApiError.fromResponse('GET', this.path, res);
    if (!res.body) throw new ApiError(0, 'NoBody', `GET ${this.path}: watch response without a body`, undefined);
    const events = decodeWatchStream<KubeObject>(res.body, { onData: req.onData, onUnknownType: req.onUnknownEventType });
    return this.metadataOnly ? asMetadataEvents(events, apiVersionOf(this.resource), this.resource.kind) : events;
  }
}

/** The watch events of a metadata-only watch with their objects as `asMetadata` (ERROR's Status passes untouched). */
async function* asMetadataEvents(events: AsyncIterable<WatchEvent<KubeObject>>, apiVersion: string, kind: string): AsyncGenerator<WatchEvent<KubeObject>> {
  for await (const e of events) {
    yield e.type === 'ERROR' || e.type === 'BOOKMARK' ? e : { type: e.type, object: asMetadata(e.object, apiVersion, kind) };
  }
}
