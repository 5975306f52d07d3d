package http

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// channelKinds and aiModes are the choices of the channel forms, in the
// order they are offered.
var (
	channelKinds = []string{messagingapi.KindTelegram, messagingapi.KindWebchat, messagingapi.KindMessenger, messagingapi.KindInstagram}
	aiModes      = []string{messagingapi.AIModeAuto, messagingapi.AIModeSuggest, messagingapi.AIModeExternal}
)

// channelsView is the channels page: the list with a mode form per row,
// and the create form.
type channelsView struct {
	Channels []messagingapi.AdminChannel
	Modes    []string
	Kinds    []string
	// Form is the create form's values; Errors its refusals by field
	// (kind, external_id, token, secret).
	Form   messagingapi.NewChannel
	Errors map[string]string
	// Notice reports what the last action did; Changed is the channel it
	// was about, and Created the channel just made, whose ingress secret
	// the page shows.
	Notice  string
	Changed string
	Created *messagingapi.AdminChannel
}

// channelsPage lists the workspace's channels. ?mode_set=CHANNEL reports
// a mode just set, ?created=CHANNEL a channel just made.
func (c *Console) channelsPage(ctx echo.Context) error {
	q := ctx.QueryParams()
	return c.drawChannels(ctx, channelsView{Form: messagingapi.NewChannel{Kind: messagingapi.KindTelegram}}, http.StatusOK, "", func(cv *channelsView) {
		for i, ch := range cv.Channels {
			switch ch.ID {
			case q.Get("mode_set"):
				cv.Changed = ch.ID
				cv.Notice = "Channel " + channelLabel(ch) + " is now in mode " + ch.AIMode + ", from the next customer message: messages already received keep the mode they came in under."
			case q.Get("created"):
				cv.Changed = ch.ID
				cv.Created = &cv.Channels[i]
				cv.Notice = "Channel " + channelLabel(ch) + " is created, in mode " + ch.AIMode + "."
			}
		}
	})
}

// channelLabel names a channel in sentences: its kind and its id on the
// platform.
func channelLabel(ch messagingapi.AdminChannel) string {
	if ch.ExternalID == "" {
		return ch.Kind
	}
	return ch.Kind + " " + ch.ExternalID
}

// drawChannels reads the channels and draws the page with status and
// message; then, when given, adjusts the page once they are read.
func (c *Console) drawChannels(ctx echo.Context, cv channelsView, status int, message string, then func(*channelsView)) error {
	id := ctx.Param("id")
	v := c.view(ctx, "Channels")
	v.Workspace, v.Current = id, "channels"
	cv.Modes, cv.Kinds = aiModes, channelKinds
	chans, err := c.app.Channels(ctx.Request().Context(), operatorOf(ctx), id)
	if err != nil {
		v.Page = cv
		return c.serviceError(ctx, "channels", v, err)
	}
	cv.Channels = chans
	if then != nil {
		then(&cv)
	}
	v.Status, v.Message, v.Page = status, message, cv
	return c.render(ctx, status, "channels", v)
}

// createChannel creates a channel from the form; messaging's refusal of a
// field is drawn beside that field, with the form as it was filled in.
func (c *Console) createChannel(ctx echo.Context) error {
	id := ctx.Param("id")
	form := messagingapi.NewChannel{
		Kind:       ctx.FormValue("kind"),
		ExternalID: ctx.FormValue("external_id"),
		Token:      ctx.FormValue("token"),
		Secret:     ctx.FormValue("secret"),
	}
	ch, err := c.app.CreateChannel(ctx.Request().Context(), operatorOf(ctx), id, formID(ctx), form)
	created := func(channelID string) string {
		return workspacePath(id) + "/channels?created=" + url.QueryEscape(channelID) + "#channel-" + url.PathEscape(channelID)
	}
	if err == nil {
		return ctx.Redirect(http.StatusSeeOther, created(ch.ID))
	}
	refused := channelsView{Form: form}
	if repeated, answer := c.formRepeat(ctx, err, created, "the channels below", func(status int, message string) error {
		return c.drawChannels(ctx, refused, status, message, nil)
	}); repeated {
		return answer
	}
	if field, message, status, ok := fieldRefusal(err, "kind", "external_id", "token", "secret"); ok {
		refused.Errors = map[string]string{field: message}
		return c.drawChannels(ctx, refused, status, "The channel was not created: "+message, nil)
	}
	if e, ok := errs.As(err); ok && e.Status == http.StatusConflict {
		// channel_exists: the platform routes to a channel by kind and
		// external id, so a second one could never receive.
		message := sentence(e.Message) + " Use that channel, or give another external id."
		refused.Errors = map[string]string{"external_id": message}
		return c.drawChannels(ctx, refused, e.Status, "The channel was not created: "+message, nil)
	}
	return c.actionError(ctx, "channels", err, func(v *view) error {
		return c.drawChannels(ctx, refused, v.Status, "The channel was not created. "+v.Message, nil)
	})
}

// setChannelAIMode sets one channel's ai_mode and goes back to the list,
// which shows the new mode and says when it applies.
func (c *Console) setChannelAIMode(ctx echo.Context) error {
	id, channelID := ctx.Param("id"), ctx.Param("channel")
	_, err := c.app.SetChannelAIMode(ctx.Request().Context(), operatorOf(ctx), id, channelID, ctx.FormValue("ai_mode"))
	if errors.Is(err, app.ErrChannelNotFound) {
		return errs.NotFound("channel_not_found", "this workspace has no such channel: go back to the list of channels and choose one from it")
	}
	if err != nil {
		return c.actionError(ctx, "channels", err, func(v *view) error {
			return c.drawChannels(ctx, channelsView{Form: messagingapi.NewChannel{Kind: messagingapi.KindTelegram}}, v.Status, "The mode was not changed. "+v.Message, nil)
		})
	}
	return ctx.Redirect(http.StatusSeeOther, workspacePath(id)+"/channels?mode_set="+url.QueryEscape(channelID)+"#channel-"+url.PathEscape(channelID))
}
