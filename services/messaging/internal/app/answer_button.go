package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// ButtonAnswerer is a transport whose platform waits for each tapped button
// to be answered: Telegram shows an inline button as loading until the bot
// calls answerCallbackQuery.
type ButtonAnswerer interface {
	AnswerButton(ctx context.Context, ch channel.Channel, tapID string) error
}

// answerTimeout bounds the answer to one tap; Telegram stops waiting for it
// after about 15 seconds anyway.
const answerTimeout = 5 * time.Second

// AnswerButton tells the platform of ch that the tap named tapID was
// received, once it is stored. It is a courtesy to the customer, so it never
// fails the delivery: an error is logged and the tap stays stored.
func (a *App) AnswerButton(ctx context.Context, ch channel.Channel, tapID string) {
	t, ok := a.transports[ch.Kind].(ButtonAnswerer)
	if !ok || tapID == "" {
		return
	}
	// The platform's request may be gone (Telegram hung up); the answer is
	// still owed to the customer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerTimeout)
	defer cancel()
	if err := t.AnswerButton(ctx, ch, tapID); err != nil {
		a.observer.ButtonNotAnswered(ch.ID, string(ch.Kind), tapID, err)
	}
}
