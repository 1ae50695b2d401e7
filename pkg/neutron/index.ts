/** Neutron v2.0 + Keystone v3 client configured from clouds.yaml. See client.ts, clouds.ts, keystone.ts, errors.ts. */
export * from './client.ts';
export * from './clouds.ts';
export * from './errors.ts';
export * from './keystone.ts';
export * from './metrics.ts';
export { DEFAULT_TIMEOUT_MS } from './http.ts';
