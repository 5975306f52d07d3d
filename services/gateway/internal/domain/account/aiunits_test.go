package account_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

func TestCheckAIUnitsUses(t *testing.T) {
	t.Parallel()
	const a, b = "01a2263e-554f-7bb9-9a4c-fd73f54e6884", "01a2263e-554f-7bb9-9a4c-fd73f54e6885"
	uses := func(n int) []account.AIUnitsUse {
		out := make([]account.AIUnitsUse, n)
		for i := range out {
			out[i] = account.AIUnitsUse{WorkspaceID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Units: 1}
		}
		return out
	}
	tests := []struct {
		name      string
		give      []account.AIUnitsUse
		wantField string // "" for valid uses
	}{
		{name: "one use", give: []account.AIUnitsUse{{WorkspaceID: a, Units: 1}}},
		{name: "at the bounds", give: []account.AIUnitsUse{{WorkspaceID: a, Units: 1000}, {WorkspaceID: b, Units: -1000}}},
		{name: "1,000 uses", give: uses(1000)},
		{name: "none", give: nil, wantField: "uses"},
		{name: "1,001 uses", give: uses(1001), wantField: "uses"},
		{name: "0 units", give: []account.AIUnitsUse{{WorkspaceID: a, Units: 1}, {WorkspaceID: b}}, wantField: "uses[1].units"},
		{name: "1,001 units", give: []account.AIUnitsUse{{WorkspaceID: a, Units: 1001}}, wantField: "uses[0].units"},
		{name: "-1,001 units", give: []account.AIUnitsUse{{WorkspaceID: a, Units: -1001}}, wantField: "uses[0].units"},
		{name: "no id", give: []account.AIUnitsUse{{WorkspaceID: "not-a-uuid", Units: 1}}, wantField: "uses[0].workspace_id"},
		{name: "a URN", give: []account.AIUnitsUse{{WorkspaceID: "urn:uuid:" + a, Units: 1}}, wantField: "uses[0].workspace_id"},
		{name: "a workspace twice", give: []account.AIUnitsUse{{WorkspaceID: a, Units: 1}, {WorkspaceID: b, Units: 1}, {WorkspaceID: strings.ToUpper(a), Units: -1}}, wantField: "uses[2].workspace_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := account.CheckAIUnitsUses(tt.give)
			var ve *account.ValidationError
			switch {
			case tt.wantField == "" && err != nil:
				t.Fatalf("CheckAIUnitsUses = %v, want nil", err)
			case tt.wantField != "" && (!errors.As(err, &ve) || ve.Field != tt.wantField):
				t.Fatalf("CheckAIUnitsUses = %v, want a validation error of %s", err, tt.wantField)
			}
		})
	}
}
