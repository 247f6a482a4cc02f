package tenure_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// Session.Campaign takes key, identity and value as arguments, but its
// errors for bad ones named Config fields the caller never set
// ("Config.Key: ... key is empty").
func TestCampaignArgumentErrorsNameTheArguments(t *testing.T) {
	s, err := tenure.NewSession(tenure.SessionConfig{Store: memory.New(nil), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, c := range []struct{ key, identity, value, want string }{
		{"", "a", "", "key is empty"},
		{"job", "", "", "identity is empty"},
		{"job", "a", "\x00", "value"},
		{"job~tenure-control", "a", "", `key "job~tenure-control" is the control key of "job"`},
	} {
		_, err := s.Campaign(context.Background(), c.key, c.identity, c.value)
		if !errors.Is(err, tenure.ErrInvalid) || strings.Contains(err.Error(), "Config.") ||
			!strings.Contains(err.Error(), "Session.Campaign") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Campaign(%q, %q, %q) = %v, want an ErrInvalid naming Session.Campaign and %q, not a Config field", c.key, c.identity, c.value, err, c.want)
		}
	}
}
