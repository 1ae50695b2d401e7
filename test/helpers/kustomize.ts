/**
 * config/ rendered as a user would: `kubectl kustomize` with the release's kubectl, optionally on a copy of config/
 * whose optional kubebuilder-style sections are all enabled.
 */
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { kubectl, repoRoot } from './crds.ts';

export interface Doc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
}

/**
 * A copy of config/ (in a new temporary directory; the caller removes it) with optional sections of config/default
 * and config/prometheus enabled, as their header comments tell users: the first '#' of each line under a '# [NAME]'
 * marker removed. `sections`: only those markers' lines (a marker's lines run until the next marker or the next line
 * that is not a comment); default: every section. `disabled`: sections that are on in config/ (e.g.
 * WEBHOOK-SELFMANAGED) commented out as their comments tell users: each line under the marker up to the next comment or
 * blank line gets a '#'.
 */
export function enabledConfigCopy(sections?: string[], disabled: string[] = []): string {
  const dir = mkdtempSync(join(tmpdir(), 'tscm-config-'));
  cpSync(join(repoRoot, 'config'), dir, { recursive: true });
  for (const file of ['default/kustomization.yaml', 'prometheus/kustomization.yaml']) {
    const path = join(dir, file);
    let body = false;
    let current: string | undefined;
    let off: string | undefined;
    const lines = readFileSync(path, 'utf8').split('\n').map((l) => {
      if (l.startsWith('apiVersion:')) body = true;
      const marker = /^# \[([A-Z-]+)\]/.exec(l);
      if (off !== undefined && !marker && l.trim() !== '' && !l.startsWith('#')) return `#${l}`;
      off = marker && disabled.includes(marker[1]!) ? marker[1] : undefined;
      if (marker) current = marker[1];
      else if (!l.startsWith('#')) current = undefined;
      const enabled = sections === undefined || (current !== undefined && sections.includes(current));
      return body && enabled && l.startsWith('#') && !marker ? l.slice(1) : l;
    });
    writeFileSync(path, lines.join('\n'));
  }
  return dir;
}

/** Rendered documents as plain YAML values (client-node's loadAllYaml would rename fields such as `from`). */
export const render = async (dir: string): Promise<Doc[]> => loadAll(await kubectl('kustomize', dir)) as Doc[];

export const find = (docs: Doc[], kind: string): Doc | undefined => docs.find((d) => d.kind === kind);
