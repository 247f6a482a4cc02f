package tenure

import "time"

// Deadlines returns [Term.Deadline] as stop and, as kill, the moment by
// which a supervisor that stops the task from outside (as `tenure run`
// stops its command: SIGTERM at stop, SIGKILL at kill) must have killed
// it: stop plus grace. With a grace from [Config.KillGrace], kill comes
// before the store can grant the key to anyone else. Both are read at
// once, so they belong to the same renewal.
func (t *Term) Deadlines(grace time.Duration) (stop, kill time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline, t.deadline.Add(grace)
}
