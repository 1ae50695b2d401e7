/**
 * How the binary's controllers plug into a ControllerManager: each controller package exports a `ControllerSetup`
 * whose `setup` declares the controller through the builder (pkg/runtime/builder.ts) — on one screen, before the
 * manager starts, so its informers, indexers and handlers exist when the first LIST runs.
 *
 * `setup` returns the Controller, or `undefined` with a logged reason when the controller cannot run in this
 * configuration (e.g. Network without Neutron credentials); it throws only on configuration it was given that is
 * unusable (e.g. an unreadable clouds.yaml) — the binary exits 2 on that.
 */
import type { Controller } from '../controller/controller.ts';
import type { ControllerManager } from '../runtime/manager.ts';
import type { NeutronNetworkAPI } from './network/neutronapi.ts';
import type { ControllerName } from './names.ts';

export interface ControllerSettings {
  /** Workers (--<name>-concurrency). Default 1. */
  concurrency?: number;
  /**
   * Neutron settings for the Network controller (--neutron-cloud-config, --neutron-cloud), and its timers (not flags:
   * tests shorten them; see NetworkReconcilerDeps).
   */
  neutron?: {
    cloudConfig: string | undefined; cloud: string | undefined; createSettleMs?: number; driftCheckMs?: number;
    /**
     * The Neutron API to use instead of one built from clouds.yaml (then cloudConfig and cloud are ignored). For tests
     * only — a fault-injection double (test/explore/neutron-double.ts) run through the same setup main.ts runs; never
     * set by the binary.
     */
    client?: NeutronNetworkAPI;
    /**
     * The Network version the controller watches and writes: 'v1' (default) or 'v2' (dual-stack; needs the CRD of
     * config/crd/v2 and, for v1 clients, the conversion webhook: docs/network-v2.md). Not a flag yet.
     */
    networkVersion?: 'v1' | 'v2';
  };
}

export interface ControllerSetup {
  name: ControllerName;
  setup(mgr: ControllerManager, settings: ControllerSettings): Controller | undefined;
}
