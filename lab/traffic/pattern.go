package traffic

// Endpoint is one host of a traffic pattern: its name and the address
// ("host:port") of its server or sink.
type Endpoint struct {
	Name string
	Addr string
}

// Pair is one flow of a pattern: From dials To.Addr with Flow.
type Pair struct {
	From, To Endpoint
	Flow     Flow
}

// AllToAll returns a flow from every endpoint to every other one, each a
// copy of template whose ID is template.ID + "/" + from + ">" + to, in a
// fixed order (by from, then to, as given). [SDN-MPTCP]'s background
// traffic is an all-to-all UDP pattern.
func AllToAll(endpoints []Endpoint, template Flow) []Pair {
	var pairs []Pair
	for _, from := range endpoints {
		for _, to := range endpoints {
			if from.Name == to.Name {
				continue
			}
			f := template
			f.ID = template.ID + "/" + from.Name + ">" + to.Name
			pairs = append(pairs, Pair{From: from, To: to, Flow: f})
		}
	}
	return pairs
}
