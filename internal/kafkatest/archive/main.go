// Command archive writes the class-data-sharing archive that the Kafka
// brokers of the tests map their classes from (kafkatest.WriteArchive);
// scripts/setup.sh runs it. It does nothing when the archive exists.
package main

import (
	"fmt"
	"os"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
)

func main() {
	path, err := kafkatest.WriteArchive()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(path)
}
