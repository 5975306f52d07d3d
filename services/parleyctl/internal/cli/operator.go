package cli

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/parleyhq/parley/pkg/adminclient"
	consoleapi "github.com/parleyhq/parley/pkg/api/console"
)

// operatorStdin is where operator create reads the password; tests swap it.
var operatorStdin io.Reader = os.Stdin

// maxPasswordInput bounds what is read from stdin: the console takes at
// most 256 characters, so anything far longer is a wrong file, not a
// password.
const maxPasswordInput = 4096

// operatorCreate creates a console operator. The password is read from
// stdin, never from a flag, where it would sit in the shell's history and
// in every process listing; one trailing newline (as echo or a file ends
// with) is not part of it.
func operatorCreate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("operator create")
	email := f.String("email", "", "the operator's email, used to sign in")
	workspace := f.String("workspace", "", "the workspace the operator sees; without it, a platform operator who sees all")
	fromStdin := f.Bool("password-stdin", false, "read the password from stdin")
	if err := f.parse(args, "email"); err != nil {
		return err
	}
	if !*fromStdin {
		return usagef("operator create: give --password-stdin and the password on stdin (passwords are never taken from a flag)")
	}
	password, err := readPassword(operatorStdin)
	if err != nil {
		return err
	}
	op, err := adminclient.New(c.call).CreateOperator(ctx, consoleapi.NewOperator{Email: *email, Password: password, WorkspaceID: *workspace})
	if err != nil {
		return err
	}
	return c.print(op)
}

// readPassword reads one line from r: the password, without its trailing
// newline (\n or \r\n).
func readPassword(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPasswordInput+1))
	if err != nil {
		return "", usagef("operator create: read the password from stdin: %v", err)
	}
	if len(b) > maxPasswordInput {
		return "", usagef("operator create: stdin holds more than %d bytes; give the password alone", maxPasswordInput)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return "", usagef("operator create: stdin was empty; pipe the password in, e.g. printf '%%s' \"$PASSWORD\" | parleyctl operator create --email E --password-stdin")
	}
	if bytes.ContainsAny(b, "\r\n") {
		return "", usagef("operator create: the password on stdin must be one line")
	}
	return string(b), nil
}
