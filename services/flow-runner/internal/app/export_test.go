package app

import "context"

// WakeDue is one round of WakeChatRuns, for the tests of package app_test.
func (a *App) WakeDue(ctx context.Context) error { return a.wakeDue(ctx) }
