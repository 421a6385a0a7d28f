package bridge

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
)

// ServeResync answers resync requests on events.SubjectResync until ctx is done: every
// handled object is announced again. Only the leading bridge serves it.
func (b *Bridge) ServeResync(ctx context.Context, nc *nats.Conn) error {
	sub, err := nc.Subscribe(events.SubjectResync, func(m *nats.Msg) {
		trigger := nats.NewInbox() // unique: the re-announcement must not be deduplicated
		n := b.Resync(trigger[len(nats.InboxPrefix):])
		b.log.Info("resync requested", zap.Int("queued", n))
		data, _ := json.Marshal(events.ResyncReply{Queued: n})
		_ = m.Respond(data)
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return sub.Unsubscribe()
}
