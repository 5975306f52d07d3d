package http

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Codes this service adds to those every service shares (pkg/errs); all
// are listed in docs/limits-and-errors.md "Error codes".
const (
	CodeConversationNotFound = "conversation_not_found"
	CodeChannelNotFound      = "channel_not_found"
	CodeChannelExists        = "channel_exists"
	CodeTagUnsupported       = "tag_unsupported"
	CodeOutsideWindow        = "outside_messaging_window"
	// CodeConversationHandedOver is an AI send or draft to a conversation
	// handed over to operators.
	CodeConversationHandedOver = "conversation_handed_over"
	// CodeAIModeExternal is an AI send to a conversation whose channel is
	// in ai_mode external.
	CodeAIModeExternal     = "ai_mode_external"
	CodeSuggestionNotFound = "suggestion_not_found"
	// CodeSuggestionReplaced is a send or discard of a draft a newer one
	// replaced.
	CodeSuggestionReplaced = "suggestion_replaced"
	// CodePlatformUnsupported is a send to a platform Parley cannot send to
	// yet (501): the request is right, the service cannot do it.
	CodePlatformUnsupported = "platform_unsupported"
)

var (
	errConversationNotFound = errs.NotFound(CodeConversationNotFound, "no conversation with this id in this workspace")
	errChannelNotFound      = errs.NotFound(CodeChannelNotFound, "no channel with this id")
	errTagUnsupported       = errs.New(http.StatusBadRequest, CodeTagUnsupported, "the tag field is not supported; on messenger and instagram send within 24 hours of the customer's last message")
)

// toHTTP maps domain errors to their public form; anything else stays as is
// and becomes 500 internal_error.
func toHTTP(err error) error {
	var convField *conversation.FieldError
	var chanField *channel.FieldError
	var platform *conversation.PlatformError
	var unsupported *conversation.UnsupportedPlatformError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &convField):
		return errs.InvalidRequest("%s", convField.Error())
	case errors.As(err, &chanField):
		return errs.InvalidRequest("%s", chanField.Error())
	case errors.Is(err, conversation.ErrNotFound):
		return errConversationNotFound
	case errors.Is(err, channel.ErrNotFound):
		return errChannelNotFound
	case errors.Is(err, channel.ErrExists):
		return errs.New(http.StatusConflict, CodeChannelExists, "a channel of this kind with this external_id already exists")
	case errors.Is(err, conversation.ErrHandedOver):
		return errs.New(http.StatusConflict, CodeConversationHandedOver, "the conversation is handed over to operators: the AI sends and drafts nothing there until they resume it")
	case errors.Is(err, conversation.ErrChannelExternal):
		return errs.New(http.StatusConflict, CodeAIModeExternal, "the channel is in ai_mode external: the developer answers there, and the AI sends nothing")
	case errors.Is(err, conversation.ErrNoSuggestion):
		return errs.NotFound(CodeSuggestionNotFound, "no suggestion waits in this conversation")
	case errors.Is(err, conversation.ErrSuggestionReplaced):
		return errs.New(http.StatusConflict, CodeSuggestionReplaced, "a newer suggestion replaced the one named: nothing was done")
	case errors.Is(err, conversation.ErrOutsideWindow):
		return errs.New(http.StatusConflict, CodeOutsideWindow, "the customer's last message is older than the messaging window (24 hours on messenger and instagram); nothing was sent")
	case errors.As(err, &platform):
		return errs.New(http.StatusBadGateway, errs.CodePlatformError, fmt.Sprintf("%s: %s", platform.Platform, platform.Description))
	case errors.As(err, &unsupported):
		return errs.New(http.StatusNotImplemented, CodePlatformUnsupported, unsupported.Error())
	}
	return err
}
