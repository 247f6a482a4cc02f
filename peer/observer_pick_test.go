package peer

import (
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/transport"
)

// TestPick: the observer's choice among answers follows the documented
// rule: the coordinator of the highest epoch any answer names; on a tie the
// coordinator's own report, else the most cautious Remaining; no
// coordinator named gives Holder "" with the highest epoch known.
func TestPick(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		got  []answer
		want tenure.Record
	}{
		{"nobody leads", []answer{{id: 1, r: transport.Report{Epoch: 4}}, {id: 2, r: transport.Report{Epoch: 7}}},
			tenure.Record{Key: "k", Term: 7}},
		{"split: the higher epoch wins", []answer{
			{id: 1, r: transport.Report{Leader: 1, LeaderEpoch: 4, Epoch: 4, TTL: 300 * ms, Remaining: 300 * ms}},
			{id: 3, r: transport.Report{Leader: 3, LeaderEpoch: 6, Epoch: 6, TTL: 300 * ms, Remaining: 300 * ms}},
			{id: 2, r: transport.Report{Leader: 1, LeaderEpoch: 4, Epoch: 4, TTL: 300 * ms, Remaining: 200 * ms}}},
			tenure.Record{Key: "k", Holder: "3", Term: 6, TTL: 300 * ms, Remaining: 300 * ms}},
		{"a higher epoch without a coordinator does not hide one", []answer{
			{id: 1, r: transport.Report{Epoch: 9}},
			{id: 2, r: transport.Report{Leader: 3, LeaderEpoch: 6, Epoch: 6, TTL: 300 * ms, Remaining: 100 * ms}}},
			tenure.Record{Key: "k", Holder: "3", Term: 6, TTL: 300 * ms, Remaining: 100 * ms}},
		{"tie: the coordinator's own word", []answer{
			{id: 1, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, TTL: 300 * ms, Remaining: 50 * ms}},
			{id: 2, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, TTL: 300 * ms, Remaining: 300 * ms}},
			{id: 3, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, TTL: 300 * ms, Remaining: 20 * ms}}},
			tenure.Record{Key: "k", Holder: "2", Term: 5, TTL: 300 * ms, Remaining: 300 * ms}},
		{"tie without the coordinator: the most cautious", []answer{
			{id: 1, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, TTL: 300 * ms, Remaining: 150 * ms}},
			{id: 3, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, TTL: 300 * ms, Remaining: 20 * ms}}},
			tenure.Record{Key: "k", Holder: "2", Term: 5, TTL: 300 * ms, Remaining: 20 * ms}},
		{"the value: the coordinator's own word first", []answer{
			{id: 1, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, TTL: 300 * ms, Remaining: 50 * ms, Value: "other"}},
			{id: 2, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, TTL: 300 * ms, Remaining: 300 * ms, Value: "10.0.0.2:80"}}},
			tenure.Record{Key: "k", Holder: "2", Term: 5, TTL: 300 * ms, Remaining: 300 * ms, Value: "10.0.0.2:80"}},
		{"the value from a member, for the same coordinator and epoch (raft)", []answer{
			{id: 1, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5}},
			{id: 3, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, Value: "10.0.0.2:80"}}},
			tenure.Record{Key: "k", Holder: "2", Term: 5, Value: "10.0.0.2:80"}},
		{"no value of another epoch", []answer{
			{id: 1, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5}},
			{id: 3, r: transport.Report{Leader: 2, LeaderEpoch: 4, Epoch: 5, Value: "old"}}},
			tenure.Record{Key: "k", Holder: "2", Term: 5}},
	} {
		if got := pick("k", tc.got); got != tc.want {
			t.Errorf("%s: pick = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestPickNeverLeads: a leader whose own answer says it has priority 0
// (a raft member handing leadership away) is not reported as holding the
// key, whoever names it; one that does not answer is taken at the others'
// word.
func TestPickNeverLeads(t *testing.T) {
	got := []answer{
		{id: 1, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5}},
		{id: 2, r: transport.Report{Leader: 2, LeaderEpoch: 5, Epoch: 5, NeverLeads: true}},
	}
	if r := pick("k", got); r.Held() || r.Term != 5 {
		t.Fatalf("pick = %+v; want free at term 5", r)
	}
	if r := pick("k", got[:1]); r.Holder != "2" {
		t.Fatalf("pick without member 2's answer = %+v; want 2 at the others' word", r)
	}
}
