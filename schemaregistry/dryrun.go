package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// CompatResult is the verdict on one local schema under one subject.
type CompatResult struct {
	Subject    string
	EventType  string
	File       string
	Level      string // the subject's compatibility level ("" for a new subject)
	Exists     bool   // the subject is already registered
	Compatible bool
	Reason     string // why not, as the registry says (verbose check)
}

// CheckCompatibility tests the local schemas against the registry without
// registering anything (a CI gate for application teams). It covers the
// subjects Preflight would register — every local schema under the Record
// strategy; existing subjects whose topic satisfies matchTopic under the
// topic strategies — plus, for the topic strategies, the subjects of the
// given topics. A subject that does not exist yet is compatible.
func (r *Registry) CheckCompatibility(ctx context.Context, matchTopic func(string) bool, topics []string) ([]CompatResult, error) {
	if matchTopic == nil {
		matchTopic = func(string) bool { return true }
	}
	type pair struct {
		subject string
		s       *Schema
	}
	seen := map[pair]bool{}
	var pairs []pair
	add := func(subject string, s *Schema) {
		p := pair{subject, s}
		if !seen[p] {
			seen[p] = true
			pairs = append(pairs, p)
		}
	}
	schemas := r.sortedSchemas()
	subjects, err := r.subjects(ctx)
	if err != nil {
		return nil, err
	}
	exists := make(map[string]bool, len(subjects))
	for _, s := range subjects {
		exists[s] = true
	}
	if r.strategy == Record {
		for _, s := range schemas {
			add(s.FullName, s)
		}
	} else {
		sort.Strings(subjects)
		for _, subject := range subjects {
			for _, s := range schemas {
				topic, ok := r.strategy.topicOf(subject, s.FullName)
				if ok && matchTopic(topic) {
					add(subject, s)
				}
			}
		}
		for _, topic := range topics {
			for _, s := range schemas {
				add(r.strategy.Subject(topic, s.FullName), s)
			}
		}
	}
	results := make([]CompatResult, 0, len(pairs))
	for _, p := range pairs {
		res := CompatResult{Subject: p.subject, EventType: p.s.EventType, File: p.s.File}
		if !exists[p.subject] {
			// A new subject: nothing to be compatible with. (Registries differ
			// in what the compatibility endpoint answers for one.)
			res.Compatible = true
			results = append(results, res)
			continue
		}
		var out struct {
			Compatible bool     `json:"is_compatible"`
			Messages   []string `json:"messages"`
		}
		path := "/compatibility" + subjectPath(p.subject) + "/versions/latest?verbose=true"
		err := r.retry(ctx, "check compatibility of "+p.subject, func(ctx context.Context) error {
			return r.do(ctx, http.MethodPost, path, schemaBody{p.s.Text}, &out)
		})
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
			res.Compatible = true // a new subject: nothing to be compatible with
		case err != nil:
			return results, err
		default:
			res.Exists = true
			res.Compatible = out.Compatible
			res.Reason = strings.Join(out.Messages, "; ")
			res.Level = r.level(ctx, p.subject)
			if !res.Compatible && res.Reason == "" {
				res.Reason = r.noReason(ctx, p.subject, p.s, res.Level)
			}
		}
		results = append(results, res)
	}
	return results, nil
}

// noReason is the reason of a refusal the registry did not explain: what
// the relay finds against the subject's latest version, or that it finds
// nothing it can name.
func (r *Registry) noReason(ctx context.Context, subject string, s *Schema, level string) string {
	own, err := r.explainAgainstLatest(ctx, subject, s, level)
	switch {
	case err != nil:
		return "the registry gave no reason, and the latest version could not be read to compare (" + err.Error() + ")"
	case strings.HasPrefix(own, noDifference):
		return "the registry gave no reason, and the relay finds " + own
	}
	return "the registry gave no reason; " + own
}

// noDifference starts explainAgainstLatest's answer when it names nothing.
const noDifference = "no difference it can name"

// explainAgainstLatest is the relay's own reason why s breaks subject's
// level, against its latest version: "against the latest version (version
// 3), as a BACKWARD change: new field x has no default, ...", or "no
// difference it can name against the latest version (version 3)".
func (r *Registry) explainAgainstLatest(ctx context.Context, subject string, s *Schema, level string) (string, error) {
	latest, err := r.latest(ctx, subject)
	if err != nil {
		return "", err
	}
	reason, direction := explainIncompatibility(s.Text, latest.Schema, level)
	if reason == "" {
		return noDifference + " against the latest version (version " + fmt.Sprint(latest.Version) + ")", nil
	}
	return "against the latest version (version " + fmt.Sprint(latest.Version) + "), as a " + direction + " change: " + reason, nil
}
