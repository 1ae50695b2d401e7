/**
 * controller-runtime's `client.IgnoreNotFound(err)` / `IgnoreAlreadyExists(err)` for promises: the call's result,
 * or undefined when it failed with that one error; every other failure is rethrown unchanged.
 *
 *   await ignoreNotFound(cms.delete(name));                 // already gone is fine
 *   const cm = await ignoreNotFound(cms.get(name));          // T | undefined
 *   await ignoreAlreadyExists(cms.create(obj));             // someone created it first is fine
 */
import { isAlreadyExists, isNotFound } from './rest.ts';

/** The result of `call`, or undefined if it failed with 404 NotFound. */
export async function ignoreNotFound<T>(call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** The result of `call`, or undefined if it failed with 409 AlreadyExists (not with other 409s, e.g. Conflict). */
export async function ignoreAlreadyExists<T>(call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (err) {
    if (isAlreadyExists(err)) return undefined;
    throw err;
  }
}
