/**
 * CRD conversion (apiextensions.k8s.io/v1 ConversionReview on `/convert`), hub-and-spoke as controller-runtime's
 * conversion webhook: one version of a kind is the hub; every other version (a spoke) converts to and from it.
 * Converting v1 → v3 is `spokes.v1.toHub` then `spokes.v3.fromHub`; from or to the hub is one step; same version is
 * the object unchanged.
 *
 * Invariants of `convertReview`:
 *  - Each object is dispatched by its own apiVersion (group/version) and kind to the conversion registered for that
 *    group and kind; the objects of one review may differ.
 *  - A converted object always gets `apiVersion` = the desired one and the source's `kind`; if the function returns
 *    an object without `metadata`, the source's is kept (the API server refuses conversions that change metadata
 *    other than labels and annotations).
 *  - Functions get deep copies: the request is never modified.
 *  - Any failure — no conversion for a kind, an unknown version, the other group, a function that throws — makes the
 *    whole answer `result: { status: 'Failure', message }` with no objects (the API server rejects the request with
 *    that message); success is `result: { status: 'Success' }` with `convertedObjects` in request order.
 *  - The envelope must be `apiVersion: apiextensions.k8s.io/v1`, `kind: ConversionReview` with a `request` holding a
 *    string `uid`, a string `desiredAPIVersion` and an `objects` array; anything else is a BadRequestError (HTTP 400).
 */
import type { KubeObject } from '../apimachinery/meta.ts';
import { BadRequestError, type HandlerContext } from './admission.ts';

/** The ConversionReview version served and answered: apiextensions.k8s.io/v1. */
export const conversionApiVersion = 'apiextensions.k8s.io/v1';

/** How one spoke version converts to and from the hub. Both get a deep copy and return the converted object. */
export interface SpokeConversion {
  /** This spoke version's object as the hub version (apiVersion is set by the caller). */
  toHub(obj: KubeObject, ctx: HandlerContext): KubeObject | Promise<KubeObject>;
  /** The hub version's object as this spoke version (apiVersion is set by the caller). */
  fromHub(hub: KubeObject, ctx: HandlerContext): KubeObject | Promise<KubeObject>;
}

/** Hub-and-spoke conversion of one kind: `{ hub: 'v2', spokes: { v1: { toHub, fromHub } } }`. */
export interface Conversion {
  /** The hub version (e.g. 'v2'), usually the storage version. */
  hub: string;
  /** Every other served version. */
  spokes: Readonly<Record<string, SpokeConversion>>;
}

/** apiextensions.k8s.io/v1 ConversionRequest: objects to convert to `desiredAPIVersion`. */
export interface ConversionRequest {
  /** Identifies this review; the response echoes it. */
  uid: string;
  /** `group/version` every object must be converted to. */
  desiredAPIVersion: string;
  /** The objects to convert, each in its own (possibly different) version. */
  objects: KubeObject[];
}

/** apiextensions.k8s.io/v1 ConversionResponse: on Success, `convertedObjects` in the order of the request's objects. */
export interface ConversionResponse {
  /** The request's uid, echoed. */
  uid: string;
  /** The converted objects, in request order (empty on Failure). */
  convertedObjects: KubeObject[];
  /** Success, or Failure with the message the API server's client sees. */
  result: { status: 'Success' } | { status: 'Failure'; message: string };
}

/** apiextensions.k8s.io/v1 ConversionReview: the envelope of a conversion request or response. */
export interface ConversionReview {
  /** Always apiextensions.k8s.io/v1 (the only version served). */
  apiVersion: typeof conversionApiVersion;
  /** Always `ConversionReview`. */
  kind: 'ConversionReview';
  /** Set in what the API server sends. */
  request?: ConversionRequest;
  /** Set in the answer. */
  response?: ConversionResponse;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Checks the envelope (see the file comment) and returns the request; throws BadRequestError otherwise. */
export function parseConversionReview(body: unknown): ConversionRequest {
  if (!isRecord(body)) throw new BadRequestError('the body is not a JSON object');
  if (body['apiVersion'] !== conversionApiVersion || body['kind'] !== 'ConversionReview') {
    throw new BadRequestError(`expected apiVersion ${conversionApiVersion} kind ConversionReview, got apiVersion ${
      JSON.stringify(body['apiVersion'])} kind ${JSON.stringify(body['kind'])}`);
  }
  const request = body['request'];
  if (!isRecord(request)) throw new BadRequestError('ConversionReview has no request');
  if (typeof request['uid'] !== 'string' || request['uid'] === '') throw new BadRequestError('ConversionReview request has no uid');
  if (typeof request['desiredAPIVersion'] !== 'string') throw new BadRequestError('ConversionReview request has no desiredAPIVersion');
  if (!Array.isArray(request['objects']) || !request['objects'].every(isRecord)) {
    throw new BadRequestError('ConversionReview request.objects is not an array of objects');
  }
  return request as unknown as ConversionRequest;
}

function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf('/');
  return i < 0 ? { group: '', version: apiVersion } : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

/** `group/kind`, the key conversions are registered under. */
export function groupKindKey(group: string, kind: string): string {
  return `${group}/${kind}`;
}

async function convertOne(obj: KubeObject, desired: string, conversions: ReadonlyMap<string, Conversion>,
  ctx: HandlerContext): Promise<KubeObject> {
  const from = splitApiVersion(obj.apiVersion ?? '');
  const to = splitApiVersion(desired);
  const kind = obj.kind ?? '';
  const conv = conversions.get(groupKindKey(from.group, kind));
  if (!conv) throw new Error(`no conversion registered for ${kind} in group ${JSON.stringify(from.group)}`);
  if (to.group !== from.group) throw new Error(`cannot convert ${obj.apiVersion ?? ''} ${kind} to another group (${desired})`);
  const known = (v: string): boolean => v === conv.hub || Object.hasOwn(conv.spokes, v);
  for (const v of [from.version, to.version]) {
    if (!known(v)) throw new Error(`${kind}: version ${JSON.stringify(v)} is neither the hub (${conv.hub}) nor a spoke`);
  }
  if (from.version === to.version) return structuredClone(obj);
  let hub = structuredClone(obj);
  if (from.version !== conv.hub) hub = await conv.spokes[from.version]!.toHub(hub, ctx);
  let out = hub;
  if (to.version !== conv.hub) {
    out = await conv.spokes[to.version]!.fromHub({ ...hub, apiVersion: `${to.group}/${conv.hub}`, kind }, ctx);
  }
  return { ...out, apiVersion: desired, kind, metadata: out.metadata ?? structuredClone(obj.metadata) };
}

/** The response to one parsed ConversionRequest (see the file comment). Never throws. */
export async function convertReview(request: ConversionRequest, conversions: ReadonlyMap<string, Conversion>,
  ctx: HandlerContext): Promise<ConversionResponse> {
  try {
    const convertedObjects: KubeObject[] = [];
    for (const obj of request.objects) convertedObjects.push(await convertOne(obj, request.desiredAPIVersion, conversions, ctx));
    return { uid: request.uid, convertedObjects, result: { status: 'Success' } };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    ctx.logger.info({ uid: request.uid, desiredAPIVersion: request.desiredAPIVersion, err: message }, 'conversion failed');
    return { uid: request.uid, convertedObjects: [], result: { status: 'Failure', message } };
  }
}

/** Wraps `response` in the ConversionReview envelope the API server expects back. */
export function conversionReviewResponse(response: ConversionResponse): ConversionReview {
  return { apiVersion: conversionApiVersion, kind: 'ConversionReview', response };
}
