package storeurl

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/tenurehq/tenure"
)

// fakeStore is a store type for Register; its methods are never called.
type fakeStore struct{ tenure.Store }

func TestRegisterAndOpen(t *testing.T) {
	refused := errors.New("refused")
	open := func(_ context.Context, u *url.URL) (*fakeStore, error) {
		if u.Host == "bad" {
			return nil, refused
		}
		return &fakeStore{}, nil
	}
	Register(open, "storeurl-test-a", "storeurl-test-b")
	ctx := context.Background()
	if s, err := tenure.Open(ctx, "storeurl-test-b://good"); err != nil || s == nil {
		t.Errorf("tenure.Open of a registered scheme = %v, %v", s, err)
	}
	// A nil *fakeStore in the interface would pass a caller's s != nil.
	if s, err := tenure.Open(ctx, "storeurl-test-a://bad"); !errors.Is(err, refused) || s != nil {
		t.Errorf("tenure.Open of a refused URL = %#v, %v; want a nil Store and the opener's error", s, err)
	}
	if s, err := Open(ctx, "storeurl-test-a://good", "storeurl-test-a", open); err != nil || s == nil {
		t.Errorf("Open = %v, %v", s, err)
	}
	if s, err := Open(ctx, "storeurl-test-a://h/%zz", "storeurl-test-a", open); !errors.Is(err, tenure.ErrInvalid) || s != nil {
		t.Errorf("Open of a bad URL = %v, %v; want ErrInvalid and nil", s, err)
	}
}

func TestRegisterString(t *testing.T) {
	var got string
	RegisterString(func(_ context.Context, raw string) (*fakeStore, error) {
		got = raw
		return &fakeStore{}, nil
	}, "storeurl-test-c")
	if s, err := tenure.Open(context.Background(), "storeurl-test-c://"); err != nil || s == nil {
		t.Errorf("tenure.Open of a scheme registered with RegisterString = %v, %v", s, err)
	}
	if got != "storeurl-test-c://" {
		t.Errorf("open got %q, want the URL printed by String, storeurl-test-c://", got)
	}
}
