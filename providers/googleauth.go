package providers

import _ "golang.org/x/oauth2/google"
