/**
 * Admission webhooks (admission.k8s.io/v1 AdmissionReview): the review's shape, how a defaulter's or validator's
 * outcome becomes the response, and the denial a handler throws or returns.
 *
 * Outcomes of a handler, and what the API server is told:
 *  - returns normally                → `allowed: true` (+ `warnings`; + a JSON patch for a defaulter that changed
 *                                      the object).
 *  - returns or throws `denied(msg)` → `allowed: false`, `status: { code: 403, reason: 'Forbidden', message: msg }`
 *                                      (code and reason overridable): the API server rejects the request and the
 *                                      client sees `admission webhook "<name>" denied the request: <msg>`.
 *  - throws anything else            → NO review answer: the server replies HTTP 500 (server.ts) and logs the error
 *                                      once with the request's uid, so the configuration's `failurePolicy` decides
 *                                      (Fail: the request is rejected as "failed calling webhook"; Ignore: admitted).
 *                                      This differs on purpose from controller-runtime, where any error is a denial:
 *                                      a bug (a TypeError) is not a verdict about the object.
 *
 * `parseAdmissionReview` is strict about the envelope: only `apiVersion: admission.k8s.io/v1`, `kind:
 * AdmissionReview`, with a `request` object holding a string `uid` (anything else is a BadRequestError: HTTP 400).
 * The response always echoes the request's uid, as the API server requires.
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import type { Logger } from '../log/logger.ts';
import { jsonPatch } from './jsonpatch.ts';

/** The AdmissionReview version served and answered: admission.k8s.io/v1. */
export const admissionApiVersion = 'admission.k8s.io/v1';

/** The operation an AdmissionRequest admits. */
export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

/** A group/version/kind (or resource) as the AdmissionRequest spells it. */
export interface GroupVersionKind {
  /** The API group ('' for the core group). */
  group: string;
  /** The version, e.g. `v1`. */
  version: string;
  /** The kind, e.g. `Deployment`. */
  kind: string;
}

/** A group/version/resource as the AdmissionRequest spells it (`resource` is the plural name). */
export interface GroupVersionResource {
  /** The API group ('' for the core group). */
  group: string;
  /** The version, e.g. `v1`. */
  version: string;
  /** The plural resource name, e.g. `deployments`. */
  resource: string;
}

/** admission.k8s.io/v1 AdmissionRequest (the fields this package reads; the rest are passed through untouched). */
export interface AdmissionRequest<T = KubeObject> {
  /** Identifies this review; the response must echo it (the server matches them). */
  uid: string;
  /** The kind of `object` as sent to this webhook (converted to the webhook's version by matchPolicy Equivalent). */
  kind?: GroupVersionKind;
  /** The resource being written, as sent to this webhook. */
  resource?: GroupVersionResource;
  /** The subresource (e.g. `status`, `scale`), absent for the main resource. */
  subResource?: string;
  /** The object's name; may be empty on CREATE with generateName. */
  name?: string;
  /** The object's namespace; absent for cluster-scoped objects. */
  namespace?: string;
  /** CREATE, UPDATE, DELETE or CONNECT. */
  operation?: Operation;
  /** Who asked: the authenticated user's name, uid, groups and extra attributes. */
  userInfo?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  /** The new object (CREATE, UPDATE); null for DELETE. */
  object?: T | null;
  /** The existing object (UPDATE, DELETE); null for CREATE. */
  oldObject?: T | null;
  /** The request will not be persisted: a webhook with side effects must not act on it. */
  dryRun?: boolean;
  /** The operation's options object (CreateOptions, UpdateOptions, DeleteOptions), as sent. */
  options?: unknown;
}

/** The status of a denied AdmissionResponse (a metav1.Status subset): HTTP code, reason, message for the client. */
export interface AdmissionStatus {
  /** The HTTP status code the client sees (default 403). */
  code?: number;
  /** A CamelCase reason (default `Forbidden`). */
  reason?: string;
  /** Why: shown to the client after `admission webhook "<name>" denied the request: `. */
  message?: string;
}

/** admission.k8s.io/v1 AdmissionResponse. */
export interface AdmissionResponse {
  /** The request's uid, echoed. */
  uid: string;
  /** Whether the request may proceed. */
  allowed: boolean;
  /** Why not (with `allowed: false`). */
  status?: AdmissionStatus;
  /** base64 of the JSON patch (RFC 6902). */
  patch?: string;
  /** `JSONPatch` when `patch` is set (the only type the API server accepts). */
  patchType?: 'JSONPatch';
  /** Shown to the client as `Warning:` lines (allowed or not). */
  warnings?: string[];
}

/** admission.k8s.io/v1 AdmissionReview: the envelope of a request (from the API server) or a response (to it). */
export interface AdmissionReview {
  /** Always admission.k8s.io/v1 (the only version served). */
  apiVersion: typeof admissionApiVersion;
  /** Always `AdmissionReview`. */
  kind: 'AdmissionReview';
  /** Set in what the API server sends. */
  request?: AdmissionRequest;
  /** Set in the answer. */
  response?: AdmissionResponse;
}

/** The request envelope was not a valid review: the server answers HTTP 400 with this message. */
export class BadRequestError extends Error {
  /** `message`: what is wrong with the envelope, sent back as the 400's body. */
  constructor(message: string) {
    super(message);
    this.name = 'BadRequestError';
  }
}

/**
 * A denial: return it or throw it from a defaulter or validator. `code` (default 403) and `reason` (default
 * 'Forbidden') go into the response's status; `warnings` are shown to the client too.
 */
export class Denied extends Error {
  /** The HTTP status code of the denial (default 403). */
  readonly code: number;
  /** Its reason (default `Forbidden`). */
  readonly reason: string;
  /** Warnings sent with the denial. */
  readonly warnings: readonly string[];

  /** A denial with `message`; `opts` override code and reason and add warnings (see `denied()`). */
  constructor(message: string, opts: { code?: number; reason?: string; warnings?: readonly string[] } = {}) {
    super(message);
    this.name = 'Denied';
    this.code = opts.code ?? 403;
    this.reason = opts.reason ?? 'Forbidden';
    this.warnings = opts.warnings ?? [];
  }
}

/** A denial with `message` (controller-runtime's `admission.Denied`); return it or throw it. */
export function denied(message: string, opts: { code?: number; reason?: string; warnings?: readonly string[] } = {}): Denied {
  return new Denied(message, opts);
}

/** Whether `v` is a Denied verdict (as returned by `denied()`). */
export function isDenied(v: unknown): v is Denied {
  return v instanceof Denied;
}

/** What every admission and conversion handler gets besides the request. */
export interface HandlerContext {
  /** Aborts when the handler's timeout passes or the client went away; pass it to any I/O. */
  signal: AbortSignal;
  /** Carries the webhook path and the request uid. */
  logger: Logger;
}

/** What a Defaulter or Validator gets besides the object: the handler context and the whole AdmissionRequest. */
export interface AdmissionContext<T> extends HandlerContext {
  /** The whole request: operation, user, dryRun, subresource, old object. */
  request: AdmissionRequest<T>;
}

/** What a validator returns: nothing, warnings for the client, or a denial. */
export type ValidationResult = void | undefined | readonly string[] | Denied;

/**
 * Validation of one type (controller-runtime's CustomValidator). Each method may be sync or async; a missing one
 * allows its operation. Objects are deep copies: changing them changes nothing.
 */
export interface Validator<T extends KubeObject = KubeObject> {
  /** Judges a new object (CREATE). */
  validateCreate?(obj: T, ctx: AdmissionContext<T>): ValidationResult | Promise<ValidationResult>;
  /** Judges a change (UPDATE): the stored object and the one that would replace it. */
  validateUpdate?(oldObj: T, newObj: T, ctx: AdmissionContext<T>): ValidationResult | Promise<ValidationResult>;
  /** Judges a deletion (DELETE) of the stored object. */
  validateDelete?(oldObj: T, ctx: AdmissionContext<T>): ValidationResult | Promise<ValidationResult>;
}

/**
 * Defaulting of one type (controller-runtime's CustomDefaulter): gets a deep copy of the request's object, mutates
 * it and/or returns the result (returning nothing means "the mutated copy"); may return or throw a denial.
 */
export type Defaulter<T extends KubeObject = KubeObject> =
  (obj: T, ctx: AdmissionContext<T>) => T | void | Denied | Promise<T | void | Denied>;

/** The handler of one admission path: the response fields for a parsed request (uid is filled in by the caller). */
export type AdmissionHandler = (request: AdmissionRequest, ctx: HandlerContext) => Promise<Omit<AdmissionResponse, 'uid'>>;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Checks the envelope (see the file comment) and returns the request; throws BadRequestError otherwise. */
export function parseAdmissionReview(body: unknown): AdmissionRequest {
  if (!isRecord(body)) throw new BadRequestError('the body is not a JSON object');
  if (body['apiVersion'] !== admissionApiVersion || body['kind'] !== 'AdmissionReview') {
    throw new BadRequestError(`expected apiVersion ${admissionApiVersion} kind AdmissionReview, got apiVersion ${
      JSON.stringify(body['apiVersion'])} kind ${JSON.stringify(body['kind'])}`);
  }
  const request = body['request'];
  if (!isRecord(request)) throw new BadRequestError('AdmissionReview has no request');
  if (typeof request['uid'] !== 'string' || request['uid'] === '') throw new BadRequestError('AdmissionReview request has no uid');
  return request as unknown as AdmissionRequest;
}

/** The AdmissionReview the server sends back. */
export function admissionReviewResponse(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: admissionApiVersion, kind: 'AdmissionReview', response };
}

function denial(d: Denied): Omit<AdmissionResponse, 'uid'> {
  return {
    allowed: false, status: { code: d.code, reason: d.reason, message: d.message },
    ...(d.warnings.length > 0 ? { warnings: [...d.warnings] } : {}),
  };
}

/** Runs `fn`, turning a thrown Denied into a returned one; other errors propagate (HTTP 500). */
async function catchDenied<R>(fn: () => R | Promise<R>): Promise<R | Denied> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof Denied) return err;
    throw err;
  }
}

/** The admission handler of a validator (`/validate-…`). CONNECT, and operations without a method, are allowed. */
export function validatingHandler<T extends KubeObject>(v: Validator<T>): AdmissionHandler {
  return async (request, hctx) => {
    const req = request as AdmissionRequest<T>;
    const ctx: AdmissionContext<T> = { ...hctx, request: req };
    const obj = req.object ? structuredClone(req.object) : undefined;
    const old = req.oldObject ? structuredClone(req.oldObject) : undefined;
    let result: ValidationResult;
    switch (req.operation) {
      case 'CREATE':
        if (!obj) throw new BadRequestError('CREATE review without object');
        result = await catchDenied(() => v.validateCreate?.(obj, ctx));
        break;
      case 'UPDATE':
        if (!obj || !old) throw new BadRequestError('UPDATE review without object and oldObject');
        result = await catchDenied(() => v.validateUpdate?.(old, obj, ctx));
        break;
      case 'DELETE':
        if (!old) throw new BadRequestError('DELETE review without oldObject');
        result = await catchDenied(() => v.validateDelete?.(old, ctx));
        break;
      default:
        result = undefined;
    }
    if (result instanceof Denied) return denial(result);
    const warnings = result ? [...result] : [];
    return { allowed: true, ...(warnings.length > 0 ? { warnings } : {}) };
  };
}

/**
 * The admission handler of a defaulter (`/mutate-…`): the defaulter gets a deep copy of `object`; the answer carries
 * the JSON patch from the request's object to the result (none when equal). Reviews without an object (DELETE) are
 * allowed unchanged.
 */
export function mutatingHandler<T extends KubeObject>(d: Defaulter<T>): AdmissionHandler {
  return async (request, hctx) => {
    const req = request as AdmissionRequest<T>;
    if (!req.object) return { allowed: true };
    const ctx: AdmissionContext<T> = { ...hctx, request: req };
    const copy = structuredClone(req.object);
    const result = await catchDenied(() => d(copy, ctx));
    if (result instanceof Denied) return denial(result);
    const defaulted = result ?? copy;
    // Through JSON: what the API server would see of the result (undefined members dropped, Dates as strings).
    const ops = jsonPatch(req.object, JSON.parse(JSON.stringify(defaulted)) as unknown);
    if (ops.length === 0) return { allowed: true };
    return { allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops)).toString('base64') };
  };
}
