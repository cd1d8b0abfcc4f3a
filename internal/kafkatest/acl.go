package kafkatest

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Allow grants principal ops on the literal resource name (a topic, a
// transactional id, or the cluster), from any host, through adm: on a
// Broker of this package or a kfake cluster alike.
func Allow(ctx context.Context, adm *kadm.Client, principal string, resource kmsg.ACLResourceType, name string, ops ...kadm.ACLOperation) error {
	acl := kadm.NewACLs().Allow(principal).AllowHosts("*").Operations(ops...).ResourcePatternType(kadm.ACLPatternLiteral)
	switch resource {
	case kmsg.ACLResourceTypeTopic:
		acl.Topics(name)
	case kmsg.ACLResourceTypeTransactionalId:
		acl.TransactionalIDs(name)
	case kmsg.ACLResourceTypeCluster:
		acl.Clusters()
	default:
		return fmt.Errorf("allow: no ACLs on %s here", resource)
	}
	results, err := adm.CreateACLs(ctx, acl)
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != nil {
			return fmt.Errorf("create ACL for %s on %s: %w", principal, name, r.Err)
		}
	}
	return nil
}
