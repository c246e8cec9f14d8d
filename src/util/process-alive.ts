// Whether a process recorded in a lock or owner file still runs (the file outlives a SIGKILLed owner).

/** True while `pid` names a running process (ours or another user's); false for anything that is not a pid. */
export function isProcessAlive(pid: number): boolean {
  // 0 and negative numbers name process groups to kill(2): never an owner.
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
