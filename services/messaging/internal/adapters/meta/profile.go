package meta

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// Profile is what Parley keeps of a customer's Meta profile.
type Profile struct {
	Name       string
	ProfilePic string
}

// profileFields are the user fields each platform's User Profile API
// offers a page: Messenger a PSID's first and last name, Instagram an
// IGSID's name and username.
var profileFields = map[channel.Kind]string{
	channel.KindMessenger: "first_name,last_name,profile_pic",
	channel.KindInstagram: "name,username,profile_pic",
}

// userProfile is the answer to GET /{user-id}?fields=...
type userProfile struct {
	FirstName  string `json:"first_name"`
	LastName   string `json:"last_name"`
	Name       string `json:"name"`
	Username   string `json:"username"`
	ProfilePic string `json:"profile_pic"`
}

// Profile reads the name and picture of the customer userID (a PSID or
// IGSID) with the page's token. Meta withholds them for some users (privacy
// settings, no consent yet); the error then says why and the caller keeps
// the contact without them.
func (g *Graph) Profile(ctx context.Context, kind channel.Kind, token, userID string) (Profile, error) {
	fields, ok := profileFields[kind]
	if !ok {
		return Profile{}, fmt.Errorf("no meta profile for %s users", kind)
	}
	if userID == "" {
		return Profile{}, fmt.Errorf("no user id to read a profile of")
	}
	var p userProfile
	if err := g.Call(ctx, kind, token, "/"+url.PathEscape(userID)+"?fields="+fields, nil, &p); err != nil {
		return Profile{}, err
	}
	name := strings.TrimSpace(p.FirstName + " " + p.LastName)
	if kind == channel.KindInstagram {
		// Instagram's name is optional on an account; the username is not.
		name = strings.TrimSpace(p.Name)
		if name == "" {
			name = p.Username
		}
	}
	return Profile{Name: name, ProfilePic: p.ProfilePic}, nil
}
