// The part of chrome-remote-interface (which ships no types) that firstVisit.ts uses.
declare module "chrome-remote-interface" {
  interface Client {
    send(method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>>;
    close(): Promise<void>;
  }
  function CDP(options: { port: number; target?: string; local?: boolean }): Promise<Client>;
  export default CDP;
}
