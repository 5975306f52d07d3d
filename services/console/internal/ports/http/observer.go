package http

import "github.com/labstack/echo/v4"

// Observer is told what the pages answered and how sign-ins went, for the
// console's metrics.
type Observer interface {
	// Answered is a request answered with status; route is the pattern of
	// the route it matched ("/workspaces/:id/keys", never its path, whose
	// ids would make a series each), "" when it matched none.
	Answered(route string, status int)
	// SignedIn is a sign-in that opened a session.
	SignedIn()
	// SignInWrong is a sign-in with a wrong email or password.
	SignInWrong()
	// SignInLimited is a sign-in refused unheard by the failed sign-in
	// limits.
	SignInLimited()
	// SignInStaleForm is a sign-in form without its anti-forgery token or
	// from another origin.
	SignInStaleForm()
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Answered(string, int) {}
func (nopObserver) SignedIn()            {}
func (nopObserver) SignInWrong()         {}
func (nopObserver) SignInLimited()       {}
func (nopObserver) SignInStaleForm()     {}

// count tells the observer each request's route and the status it was
// answered with. An error is rendered here, by the console's error page,
// so that its status is the one told.
func (c *Console) count(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ctx echo.Context) error {
		if err := next(ctx); err != nil {
			ctx.Error(err)
		}
		c.obs.Answered(ctx.Path(), ctx.Response().Status)
		return nil
	}
}
