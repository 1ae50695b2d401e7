/**
 * Switches that make a test weaker — skip it, or scale it down — for a developer's machine. Invariant: none of them
 * can weaken a CI run, and a weakened run says so in its output. With `CI` set (to anything but '', '0' or 'false',
 * as CI services set it) a switch that is set throws at the test file's load, so the file fails with a message naming
 * the switch; without `CI` the run writes one `[weakened] …` line to stderr, and the test names the switch in its
 * skip reason or title (`weakenedNote`).
 */

/** Whether this run is CI's (the `CI` environment variable, as GitHub Actions, GitLab and others set it). */
export function inCI(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env['CI'];
  return v !== undefined && v !== '' && v !== '0' && v.toLowerCase() !== 'false';
}

/**
 * The value of the weakening switch `name` if it is set and `weakens(value)` (default: any value weakens), after
 * refusing it under CI and announcing it otherwise; undefined when it is unset or does not weaken.
 * `what` says what the switch does to the test ("skips the container image test").
 */
export function weakeningSwitch(name: string, what: string, opts: { env?: NodeJS.ProcessEnv; weakens?: (value: string) => boolean; write?: (line: string) => void } = {}): string | undefined {
  const env = opts.env ?? process.env;
  const value = env[name];
  if (value === undefined || value === '' || !(opts.weakens ?? (() => true))(value)) return undefined;
  if (inCI(env)) {
    throw new Error(`${name}=${value} ${what}; refused because CI=${env['CI'] ?? ''} is set: a CI run must run the full test (unset ${name})`);
  }
  (opts.write ?? ((l: string) => void process.stderr.write(l)))(`[weakened] ${name}=${value}: ${what}\n`);
  return value;
}

/** The text a weakened test puts in its title or skip reason: `weakened: NAME=value (what)`. */
export function weakenedNote(name: string, value: string, what: string): string {
  return `weakened: ${name}=${value} ${what}`;
}
