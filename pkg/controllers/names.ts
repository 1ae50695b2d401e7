/** The controllers this binary ships, by the name used in --controllers and --<name>-concurrency (no imports: cheap). */
export const knownControllers = ['foo', 'network', 'deployment'] as const;
export type ControllerName = (typeof knownControllers)[number];
